"""What an environment costs, from its synthesized templates and the committed price table (tools/prices.json).

    make cost ENV=dev                            # synth, then: python -m tools.cost --cdk-out cdk.out

Prices every SageMaker endpoint of every stack at its autoscaling min and max (hourly and monthly), every
interface VPC endpoint (per endpoint and Availability Zone, i.e. per ENI, an always-on charge of the
isolated environments), and every SageMaker job state (createTrainingJob, createProcessingJob,
createHyperParameterTuningJob) of every state machine at its bound: max runtime x instances, times
MaxNumberOfTrainingJobs for a tuning job. A new job state is priced without a code change. Managed spot jobs
show the table's labelled saving assumption and the on-demand ceiling. A type without a price in the table
is never guessed: the priced lines are printed, then one `cost error:` line on stderr, exit 1.

The review summary (tools/review_diff/) uses the same model for the cost delta of a change.
"""

from tools.cost.cli import main
from tools.cost.estimate import estimate, estimate_stacks
from tools.cost.model import Endpoint, Estimate, InterfaceEndpoints, Job, Line, Workload
from tools.cost.prices import PRICES, PriceTable, UnpricedError
from tools.cost.report import ASSUMPTIONS, LEFT_OUT, SCOPE, money, rate, render_text, total, total_lines, totals_text
from tools.cost.templates import workload_from_templates

__all__ = [
    "ASSUMPTIONS",
    "LEFT_OUT",
    "PRICES",
    "SCOPE",
    "Endpoint",
    "Estimate",
    "InterfaceEndpoints",
    "Job",
    "Line",
    "PriceTable",
    "UnpricedError",
    "Workload",
    "estimate",
    "estimate_stacks",
    "main",
    "money",
    "rate",
    "render_text",
    "total",
    "total_lines",
    "totals_text",
    "workload_from_templates",
]
