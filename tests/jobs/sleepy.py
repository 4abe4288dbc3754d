"""A job that mostly sleeps: a short computation, then a long wait, over and over."""

import time


def step(i: int) -> int:
    return sum(j * j for j in range(2_000 + i % 7))


def main(seconds: float) -> None:
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        step(i)
        time.sleep(0.1)
        i += 1


if __name__ == "__main__":
    import sys

    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
