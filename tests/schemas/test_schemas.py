import json
import subprocess
import sys

import pytest

from pipeline.pusht.features import pusht_features
from schemas import FeatureSpec, JobSpec, SpecError, load_yaml, validate


def test_pusht_features_round_trip():
    spec = pusht_features(96)
    again = FeatureSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    assert again.camera_names == ("top",)


@pytest.mark.parametrize(
    ("data", "field", "hint"),
    [
        ({"cameras": [], "action_dim": 2}, "cameras", "at least 1"),
        ({"cameras": [{"name": "top", "height": 96, "width": 96}], "action_dim": 0}, "action_dim", "greater than 0"),
        ({"cameras": [{"name": "action", "height": 96, "width": 96}], "action_dim": 2}, "cameras[0].name", "reserved"),
        ({"cameras": [{"name": "top", "height": 96, "width": 96}], "action_dim": 2, "fsp": 10}, "fsp", "spelling"),
        ({"cameras": [{"name": "top", "height": 96, "width": 96}], "action_dim": 2,
          "action_low": [0, 0, 0]}, "action_low", "action_dim"),
    ],
)
def test_feature_errors_name_field_value_and_fix(data, field, hint):
    with pytest.raises(SpecError) as info:
        validate(FeatureSpec, data, source="features.json")
    message = str(info.value)
    assert "features.json" in message
    assert field in message or field.split(".")[0] in message
    assert hint in message
    assert "iws schema" in message


def test_job_spec_yaml_errors(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: demo\ninit: {dataset: d.zarr}\naction_sources: {a: {kind: scripted}}\n"
                    "episodes: -3\nhorizon: 10\noutput: {path: out}\n")
    with pytest.raises(SpecError) as info:
        load_yaml(JobSpec, path)
    assert "episodes" in str(info.value) and "-3" in str(info.value)

    path.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_yaml(JobSpec, path)
    with pytest.raises(SpecError, match="does not exist"):
        load_yaml(JobSpec, tmp_path / "missing.yaml")


def test_iws_schema_job_prints_json_schema():
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "schema", "job"],
                         capture_output=True, text=True, check=True)
    schema = json.loads(out.stdout)
    assert schema["title"] == "JobSpec"
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"JobSpec.{name} has no description"
    # A job file can name Python code to run everywhere: the schema says so, where it is named.
    assert "as you would a Python script" in schema["description"]
    for where in (schema["$defs"]["PolicySource"]["properties"]["policy"],
                  schema["$defs"]["FilterSpec"]["properties"]["scorer"]):
        assert "run on the driver and every worker" in where["description"]
        assert "as trusted as a script" in where["description"]
