"""``python -m torchrank.training fit --config configs/train/neural_ndcg.yaml``."""

import sys

from torchrank._extras import MissingExtra, require

if __name__ == "__main__":
    try:
        require("lightning", "Training")
        require("jsonargparse", "The training command line")
    except MissingExtra as error:  # one line, as the other command lines print their errors
        sys.exit(f"python -m torchrank.training: error: {error}")
    from torchrank.training.cli import main

    main()
