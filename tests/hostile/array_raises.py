# Returns an object whose __array__ raises (and whose __float__ lies).
class Trap:
    def __array__(self, *args, **kwargs):
        raise RuntimeError("no array for you")

    def __float__(self):
        return 1.0


def attention_reading(weights, values):
    return Trap()
