"""The private CA and HTTPS receiver the tests call back to (localcloud.tls_receiver)."""

from localcloud.tls_receiver import (
    CA_NAME,
    PrivateCa,
    Received,
    make_private_ca,
    read_request,
    tls_receiver,
)

__all__ = ["CA_NAME", "PrivateCa", "Received", "make_private_ca", "read_request", "tls_receiver"]
