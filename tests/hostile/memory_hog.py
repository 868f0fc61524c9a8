# Allocates and touches memory until something stops it (the address-space limit).
def attention_reading(weights, values):
    hoard = []
    while True:
        hoard.append(np.ones(1 << 25))  # 256 MiB, written
