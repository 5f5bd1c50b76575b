"""``python -m dspsim.study.calibrate``: refit the J6 model's two DDR values to the documents'
figures (every op's ``document``) and print them with the residuals."""

from dspsim.study.calibrate.fitting import fit_seed
from dspsim.study.calibrate.measure import seed_measurements


def main() -> None:
    result = fit_seed()
    for k, v in result.values.items():
        print(f"{k} = {v:.6g}")
    for m, r in zip(seed_measurements(), result.residuals_pct):
        print(f"{m.label(with_op=True)}: target {m.cycles:.0f} cycles, residual {r:+.4f} %")


if __name__ == "__main__":
    main()
