"""A weight-decay plasticity sweep, then its table: `plasticity_report` reads a run directory back.

Runs the `wd_plasticity` recipe with its quick config (tiny sizes, seconds) at weight decays 0 and
1.0, then prints the sweep's table from the files it wrote. For the real sweep (about 15
minutes on 2 CPU cores) run `hf-ext run wd_plasticity` and point `plasticity_report` at
`outputs/wd_plasticity`.
"""

from hf_ext.plasticity import plasticity_report
from hf_ext.recipes import shipped_config
from hf_ext.recipes.wd_plasticity import main as wd_plasticity

quick = ["--config", str(shipped_config("wd_plasticity_quick")), "--output_dir", "outputs/wd_plasticity"]
wd_plasticity([*quick, "--weight_decays", "0.0", "1.0"])

rows = plasticity_report("outputs/wd_plasticity")  # prints the table; one dict per weight decay
print(f"{len(rows)} weight decays; plot in outputs/wd_plasticity/plasticity.png")
