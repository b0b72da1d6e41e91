# A workload for the browser tests: one hot function named after its service
# (OTEL_SERVICE_NAME, which the agents report as service.name), busy a third of the time (the
# test machine's cores stay free for the controller, agents and browser), for at most argv[1]
# seconds.
import os
import sys
import time


def hot_checkout(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def hot_search(n):
    return sum(hash(str(i)) for i in range(n))


def main():
    f = hot_checkout if os.environ.get("OTEL_SERVICE_NAME") == "checkout" else hot_search
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        t = time.time()
        while time.time() - t < 0.02:
            f(2000)
        time.sleep(0.04)


main()
