"""Train GLNS's set-cover denoiser on subproblems HiGHS solves to optimality on small instances (CPU, minutes).

    hf-ext run set_cover_denoiser                          # the shipped settings: the default GLNS caches
    hf-ext run set_cover_denoiser examples=200 epochs=60 output_dir=outputs/denoiser_200
    hf-ext run set_cover_denoiser --config set_cover_denoiser_quick   # seconds: the end-to-end check

Writes a checkpoint in save_pretrained's layout (``config.json`` with the architecture and these settings,
``model.safetensors``) that ``load_denoiser(output_dir)`` reads and ``hf-ext run set_cover denoiser=...`` uses,
``results.json`` with the loss per epoch and ``training_loss.png``. With the shipped settings it is the same model
``default_denoiser()`` builds and caches the first time GLNS runs. Progress: tqdm bars for the HiGHS solves and the
epochs. On several processes the first trains and the others wait (the training is one small sequential loop).
"""

from dataclasses import asdict, dataclass, field
from pathlib import Path

from trl import TrlParser

from hf_ext.companion.combinatorial.set_cover import DenoiserTrainingConfig, save_denoiser, train_denoiser
from hf_ext.recipes._jobs import on_main_process
from hf_ext.recipes._plotting import plot_curves
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, settings_parser


@dataclass
class SetCoverDenoiserArguments(DenoiserTrainingConfig):
    output_dir: str = field(default="outputs/set_cover_denoiser", metadata={"help": "Where the checkpoint goes."})

    def training(self) -> DenoiserTrainingConfig:
        """The training settings alone, as the checkpoint stores them."""
        return run_config(DenoiserTrainingConfig, self)


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(SetCoverDenoiserArguments)


@on_main_process
def main(argv: list[str] | None = None) -> dict:
    (args,) = parser(argv).parse_args_and_config(argv)
    training, history, out = args.training(), [], Path(args.output_dir)
    model = train_denoiser(training, history)
    save_denoiser(model, out, training)
    plot_curves(
        {"binary cross-entropy on x_0": list(enumerate(history, 1))},
        out / "training_loss.png",
        "set-cover denoiser: training loss per epoch",
    )
    parameters = sum(p.numel() for p in model.parameters())
    results = {"loss_per_epoch": history, "training": asdict(training), "parameters": parameters}
    write_results(out, results)
    print(f"final loss {history[-1]:.4f} after {training.epochs} epochs; wrote {out / 'model.safetensors'}")
    return results


if __name__ == "__main__":
    run_as_script(main)
