import sys

from .cli import main

if __name__ == "__main__":  # never when a child process re-imports the main module
    sys.exit(main())
