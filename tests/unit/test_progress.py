import pandas as pd

from tasks import progress
from tests.helpers import run, write_csv


def test_long_stages_report_dask_task_progress(tmp_path):
    events = []
    progress.set_reporter(lambda stage, done, total: events.append((stage, done, total)))
    try:
        df = pd.DataFrame({"x": range(100), "c": ["a", "b"] * 50})
        run({"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}]},
            write_csv(df, tmp_path / "d.csv"), tmp_path, npartitions=4)
    finally:
        progress.set_reporter(None)
    stages = {e[0] for e in events}
    assert {"fill_missing", "vocab", "encode"} <= stages
    for name in ("fill_missing", "vocab", "encode"):
        last = [e for e in events if e[0] == name][-1]
        assert last[1] == last[2] > 0  # finished: done == total
