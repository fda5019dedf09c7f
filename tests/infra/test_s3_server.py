"""The SeaweedFS test server behaves like the S3 the pipeline relies on: credentials enforced,
conditional writes honoured, the AWS variables scoped to the test that asked for them."""

from __future__ import annotations

import logging
import os

import pytest

from tests.fixtures.s3 import S3Bucket, S3Server

botocore_exceptions = pytest.importorskip("botocore.exceptions")
log = logging.getLogger(__name__)


def _status(error: Exception) -> int:
    return int(error.response["ResponseMetadata"]["HTTPStatusCode"])


def test_conditional_put_second_writer_gets_412(s3_env: S3Bucket) -> None:
    client = s3_env.server.client()
    first = client.put_object(Bucket=s3_env.name, Key="commits/ep-000001", Body=b"first",
                              IfNoneMatch="*")
    assert first["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        client.put_object(Bucket=s3_env.name, Key="commits/ep-000001", Body=b"second",
                          IfNoneMatch="*")
    assert _status(caught.value) == 412
    assert caught.value.response["Error"]["Code"] == "PreconditionFailed"
    body = client.get_object(Bucket=s3_env.name, Key="commits/ep-000001")["Body"].read()
    assert body == b"first"  # the losing writer changed nothing


@pytest.mark.parametrize("which", ["secret", "access_key"])
def test_bad_credentials_are_rejected(s3_env: S3Bucket, which: str) -> None:
    server = s3_env.server
    bad = ({"secret_key": "not-the-secret"} if which == "secret"
           else {"access_key": "AKIAUNKNOWNKEY000000"})
    client = server.client(**bad)
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        client.put_object(Bucket=s3_env.name, Key="x", Body=b"x")
    assert _status(caught.value) == 403
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        client.list_objects_v2(Bucket=s3_env.name)
    assert _status(caught.value) == 403
    assert server.client().list_objects_v2(Bucket=s3_env.name)["KeyCount"] == 0


def test_anonymous_requests_are_rejected(s3_env: S3Bucket) -> None:
    from urllib.error import HTTPError
    from urllib.request import urlopen

    with pytest.raises(HTTPError) as caught:
        urlopen(f"{s3_env.server.endpoint_url}/{s3_env.name}", timeout=10)
    assert caught.value.code == 403


def test_env_points_boto3_at_the_server_for_this_test(s3_env: S3Bucket) -> None:
    import boto3

    assert os.environ["AWS_ENDPOINT_URL"] == s3_env.server.endpoint_url
    client = boto3.client("s3")  # the standard chain: endpoint and credentials from the env
    client.put_object(Bucket=s3_env.name, Key="hello.txt", Body=b"hi")
    names = [b["Name"] for b in client.list_buckets()["Buckets"]]
    assert s3_env.name in names
    assert s3_env.url("a/b.zarr") == f"s3://{s3_env.name}/a/b.zarr"


def test_each_test_gets_a_fresh_bucket(s3_server: S3Server) -> None:
    first, second = s3_server.create_bucket(), s3_server.create_bucket()
    assert first != second
    assert s3_server.client().list_objects_v2(Bucket=second)["KeyCount"] == 0
    log.info("SeaweedFS start-up took %.2f s", s3_server.startup_s)
    assert s3_server.startup_s < 60
