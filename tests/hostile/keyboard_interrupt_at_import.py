# KeyboardInterrupt raised at import time.
raise KeyboardInterrupt
