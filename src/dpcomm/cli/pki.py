"""``dpcomm pki init|issue``: the local certificate authority and node certificates."""

from __future__ import annotations

import argparse
from typing import Any

from dpcomm.cli.output import bounded_int, check_writable_folder
from dpcomm.errors import InvalidParameterError


def _command_init(args: argparse.Namespace) -> int:
    from dpcomm.engine.network.pki import CertificateAuthority

    check_writable_folder("--dir", args.dir)
    authority = CertificateAuthority.create(
        args.dir, name=args.ca_name, valid_days=args.valid_days, overwrite=args.force
    )
    print(f"certificate authority: {authority.cert_path}")
    print(f"private key (0600):    {authority.key_path}")
    return 0


def _command_issue(args: argparse.Namespace) -> int:
    from dpcomm.engine.network.pki import CertificateAuthority, issue_many

    names = [name.strip() for group in args.name for name in group.split(",")]
    if not names or "" in names:
        raise InvalidParameterError(
            "--name", "node names, none empty (repeat --name or separate them by commas)", args.name
        )
    authority = CertificateAuthority.load(args.dir)
    out_dir = args.out if args.out is not None else args.dir
    check_writable_folder("--out", out_dir)
    issued = issue_many(authority, names, out_dir, valid_days=args.valid_days, overwrite=args.force)
    for name, credentials in issued.items():
        print(f"{name}: {credentials.cert_path} {credentials.key_path}")
    print(f"{len(issued)} certificate(s) issued; CA certificate: {out_dir}/ca.pem")
    return 0


def _add_days_option(parser: argparse.ArgumentParser, *, default: int) -> None:
    """``--days``: how long what is written stays valid."""
    parser.add_argument(
        "--days",
        dest="valid_days",
        metavar="DAYS",
        type=bounded_int(1),
        default=default,
        help=f"validity (default {default})",
    )


def add_pki_command(commands: Any) -> None:
    """Register ``pki`` (with ``init`` and ``issue``) on the top-level subparsers."""
    parser = commands.add_parser(
        "pki",
        help="local certificate authority and per-node certificates for mutual TLS",
        description=(
            "Create a local certificate authority (Ed25519; ca.pem, ca.key mode 0600) and "
            "issue one certificate per node, whose common name is the node's name: the "
            "identity every mutually authenticated TLS 1.3 hop checks. Existing keys and "
            "certificates are never overwritten without --force, nor written through a "
            "symbolic link."
        ),
    )
    actions = parser.add_subparsers(dest="pki_command", required=True)
    init = actions.add_parser("init", help="create the certificate authority in --dir")
    init.add_argument("--dir", required=True, help="directory of the CA (created if needed)")
    init.add_argument("--ca-name", default="dpcomm local CA", help="common name of the CA")
    _add_days_option(init, default=3650)
    init.add_argument("--force", action="store_true", help="replace an existing CA")
    init.set_defaults(handler=_command_init)
    issue = actions.add_parser("issue", help="issue node certificates signed by the CA in --dir")
    issue.add_argument("--dir", required=True, help="directory of the CA")
    issue.add_argument(
        "--name",
        required=True,
        action="append",
        help="node name, e.g. source-17 or 'scrambler-(A)-3'; repeat or comma-separate",
    )
    issue.add_argument(
        "--out", help="where to write <name>.pem, <name>.key, ca.pem (default --dir)"
    )
    _add_days_option(issue, default=365)
    issue.add_argument(
        "--force", action="store_true", help="replace existing certificates and keys"
    )
    issue.set_defaults(handler=_command_issue)
