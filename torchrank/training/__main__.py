"""``python -m torchrank.training fit --config configs/train/neural_ndcg.yaml``."""

from torchrank.training.cli import main

if __name__ == "__main__":
    main()
