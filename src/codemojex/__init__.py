"""Codemojex: a competition to crack a six-emoji code, built on EchoMQ.

The host admits guesses (:mod:`codemojex.guesses`) and never scores; the score worker
(:mod:`codemojex.score_worker`) is the one authority. The pure game rules live in
:mod:`codemojex.engine`, :mod:`codemojex.keyboard` and :mod:`codemojex.ranking`, which import neither
Redis nor the queue.
"""
