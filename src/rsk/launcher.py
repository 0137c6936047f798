"""The `rsk` command for an interpreter started without `site` (`python3 -S PATH/rsk/launcher.py ARGS`).

An agent's command that a broker runs needs only the standard library, and a Python that skips `site`
starts several times sooner: no site-packages scan, no `.pth` files (some import whole packages at every
start). This file puts the directory that holds the `rsk` package on the path, and `rsk.entry` loads
`site` only when the command runs here after all. bin/rsk and install.sh's shim start rsk this way.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    # the script's own directory is the package: keep its modules (errors, paths, ...) off the top level
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.append(os.path.dirname(here))
    from rsk.entry import main

    main()
