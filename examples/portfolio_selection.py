"""K-sparse online portfolio selection with transaction costs on the DJIA data set of universal-portfolios.

K-sparse TCO holds at most K of the 30 stocks each day: PSGA on the DC penalty 1 - (sum of the K largest
weights), each proximal step computed by ADMM. It runs online against TCO2 (dense) and TCO2 cut to its K
largest weights, paying 0.25% on every unit traded (exact self-financing accounting). About 15 s on a CPU.
"""

from hf_ext.companion.evaluation.portfolio import TopKTCO, backtest, summarize
from hf_ext.companion.portfolio import TCO, SparseTCO, SparseTCOConfig, TCOConfig, load_relatives

relatives = load_relatives("djia")  # (periods, assets) price relatives, read without importing universal
cost = 0.0025
strategies = {
    "K-sparse TCO": SparseTCO(SparseTCOConfig(k=5, cost=cost, rho=1.0)),
    "top-5 TCO2": TopKTCO(TCO(TCOConfig(cost=cost)), k=5),
    "TCO2": TCO(TCOConfig(cost=cost, predictor="window")),
}
for name, strategy in strategies.items():
    metrics = summarize(backtest(strategy, relatives))  # charged the strategy's own cost
    print(
        f"{name}: wealth {metrics['final_wealth']:.3f}, volatility {metrics['annual_volatility']:.3f}, "
        f"at most {metrics['max_holdings']} assets held"
    )
sparse = strategies["K-sparse TCO"]
print(
    f"PSGA: {sum(sparse.iterations) / len(sparse.iterations):.1f} iterations per period, "
    f"K-sparse by the penalty alone in {sparse.penalty_sparse} of {len(sparse.iterations)} periods"
)
