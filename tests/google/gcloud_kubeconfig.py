"""Write kubeconfigs exactly as gcloud writes them: gcloud's own writer, run from the SDK.

`gcloud container clusters get-credentials` needs a Google project to ask; its writer
(googlecloudsdk.api_lib.container.util.ClusterConfig.GenKubeconfig) does not. This runs that
writer with the installed SDK's interpreter and libraries, for a made-up cluster, into
KUBECONFIG, with a scratch CLOUDSDK_CONFIG (so container/use_application_default_credentials
can be set as a person would with gcloud config set). The output is gcloud's, byte for byte.

    python tests/google/gcloud_kubeconfig.py OUT.yaml [--adc] [--impersonate SA] [--dns]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SDK = Path("/usr/lib/google-cloud-sdk")
WRITER = r"""
import sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/third_party"]  # as lib/gcloud.py sets them
from googlecloudsdk.api_lib.container import util
cfg = util.ClusterConfig(
    cluster_name=sys.argv[2], zone_id=sys.argv[3], project_id=sys.argv[4], server=sys.argv[5],
    ca_data=sys.argv[6] or None, dns_endpoint=sys.argv[7] or None,
    impersonate_service_account=sys.argv[8] or None, auth_provider="gcp",  # as Persist() sets it
)
cfg.GenKubeconfig()
"""


def sdk_python() -> str:
    bundled = SDK / "platform" / "bundledpythonunix" / "bin" / "python3"
    return str(bundled) if bundled.exists() else shutil.which("python3") or sys.executable


def available() -> bool:
    return (SDK / "lib" / "googlecloudsdk").is_dir()


def write(
    out: Path,
    *,
    cluster: str = "main",
    zone: str = "europe-west1",
    project: str = "kubetray-proof",
    server: str = "https://34.76.0.1",
    ca_data: str = "",
    adc: bool = False,
    impersonate: str = "",
    dns: str = "",
) -> str:
    """Run gcloud's writer into ``out`` (appended, as get-credentials does); its text."""
    with tempfile.TemporaryDirectory() as config:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": config,
            "KUBECONFIG": str(out),
            "CLOUDSDK_CONFIG": config,
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        }
        if adc:
            env["CLOUDSDK_CONTAINER_USE_APPLICATION_DEFAULT_CREDENTIALS"] = "true"
        subprocess.run(
            [
                sdk_python(),
                "-c",
                WRITER,
                str(SDK / "lib"),
                cluster,
                zone,
                project,
                server,
                ca_data,
                dns,
                impersonate,
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return out.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--adc", action="store_true")
    parser.add_argument("--impersonate", default="")
    parser.add_argument("--dns", default="")
    parser.add_argument("--cluster", default="main")
    args = parser.parse_args()
    write(args.out, cluster=args.cluster, adc=args.adc, impersonate=args.impersonate, dns=args.dns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
