"""A service-account key made for one emulator run, to sign upload URLs locally.

On Google Cloud the intake signs through IAM signBlob and holds no key; the emulators
have no IAM, so the google-emulators stack writes a throwaway key (readable by its owner
only) that nothing outside this machine accepts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SIGNER = "intake@demo-gradeq.iam.gserviceaccount.com"


def local_signing_key(data_dir: Path) -> Path:
    """The key file under `data_dir`, made on first use."""
    path = data_dir / "upload-signer.json"
    if path.exists():
        return path
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "demo-gradeq",
        "private_key_id": "local",
        "private_key": pem,
        "client_email": SIGNER,
        "client_id": "0",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(info, out)
    return path
