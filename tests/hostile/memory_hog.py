# Allocates memory until something stops it (the address-space limit). Each block is touched at
# one place only: the limit stops the allocation itself, and writing every page would only make
# the test slow on a busy machine.
def attention_reading(weights, values):
    hoard = []
    while True:
        block = np.empty(1 << 25)  # 256 MiB
        block[0] = 1.0
        hoard.append(block)
