// EchoMQ dashboard: refresh the board in place every few seconds (GET /?fragment=1), and ask before a
// delete. Without this script the page works as plain HTML: fresh at each load, forms posted as they are.
"use strict";

(function () {
  const board = document.getElementById("board");
  const every = Number(document.body.dataset.refreshMs) || 2000;

  function busy() {
    // Never swap the table under a focused control: keyboard users keep their place.
    const active = document.activeElement;
    return active !== null && board.contains(active) && active.matches("button, a, input");
  }

  async function refresh() {
    if (!document.hidden && !busy()) {
      try {
        const reply = await fetch("/?fragment=1", { headers: { Accept: "text/html" }, cache: "no-store" });
        if (reply.ok) {
          const html = await reply.text();
          if (!busy()) board.innerHTML = html;
        }
      } catch (error) {
        // The dashboard's server is away for a moment: keep what is shown, try again next time.
      }
    }
    window.setTimeout(refresh, every);
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });

  window.setTimeout(refresh, every);
})();
