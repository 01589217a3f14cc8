"""``python -m swarp.train.eval CHECKPOINT [--scenario S] [--episodes N] [--device D] [--seed S]
[--option NAME=VALUE ...] [--video PATH] [--import MODULE]``: the evaluation command. It forwards to
``swarp.train.evaluate.main``, beside ``evaluate`` itself (``swarp.train.evaluate`` is the module
attribute-shadowed by the function in ``swarp.train``, so the command keeps a module of its own)."""

from swarp.train.evaluate import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
