# Objects that would write a marker file if the grader ever unpickled them.
import os


class Payload:
    def __reduce__(self):
        return (os.system, (f"touch /tmp/{TAG}-unpickled",))

    __reduce_ex__ = lambda self, protocol: self.__reduce__()  # noqa: E731


def attention_reading(weights, values):
    return Payload()


def count_routing_distributions(*layer):
    return np.array([Payload()], dtype=object)
