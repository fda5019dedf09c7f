"""Print the `iws train --config` of a continued training run: a recipe (experiments/recipes/*.json,
the architecture options and dynamics settings the ablations chose) under a run's own schedule,
batch and budget. Shared by scripts/continue_pusht_training.sh and scripts/gpu_training_burst.sh;
standard library only (the GPU machine has no project dependencies before the wheels go in).

    python3 scripts/recipe_config.py experiments/recipes/recipeA_lowlr.json --dyn-steps 6000 \
        --batch 4 --ft-steps 1000 > run/continue.json
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", help="recipe JSON; '' for the checkpoint's own recipe")
    parser.add_argument("--dyn-steps", type=int, required=True, help="schedule length of the dynamics stage")
    parser.add_argument("--batch", type=int, required=True, help="dynamics windows per step")
    parser.add_argument("--ft-steps", type=int, required=True, help="schedule length of the decoder fine-tune")
    args = parser.parse_args()
    recipe = json.load(open(args.recipe)) if args.recipe else {}
    # Fed-back training from the first step: the run continues a model that has learned to predict.
    dynamics = {**recipe.get("dynamics", {}), "steps": args.dyn_steps, "batch_size": args.batch,
                "feedback_start": 0.0, "warmup": 20}
    print(json.dumps({**recipe, "dynamics": dynamics, "decoder_finetune": {"steps": args.ft_steps}}, indent=1))


if __name__ == "__main__":
    main()
