# rlplace's own stand-in for a verl entry module, in verl's shape: only its @hydra.main is read (never run).
# verl's generation server composes the trainer's config but places standalone rollout servers, not a trainer.
import hydra


@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
def main(config):
    raise SystemExit("test data: not a trainer")
