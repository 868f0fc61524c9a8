# KeyboardInterrupt raised inside a function.
def predict_shapes(*layer):
    raise KeyboardInterrupt
