"""python -m itertime ARGS: the `itertime` command (installed beside this package in itertime/bin/)."""
# Invariant: the process becomes the command (exec): its output, errors and exit status are the command's.
import os
import sys


def main():
    command = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "itertime")
    if not os.access(command, os.X_OK):
        sys.exit(f"itertime: {command}: the command is not installed beside the module; reinstall the package")
    os.execv(command, [command, *sys.argv[1:]])


if __name__ == "__main__":
    main()
