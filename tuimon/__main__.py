"""``python -m tuimon`` and the ``tuimon`` command."""
import os


def main() -> None:
    # numpy's OpenBLAS starts a thread a core as numpy is imported, and they spin
    # between tasks; tuimon does no linear algebra, and on a 300 MB summary the
    # spinning took 0.05-0.25 s of CPU from the cores the parse runs on
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .commands.cli import entry
    entry()


if __name__ == "__main__":
    main()
