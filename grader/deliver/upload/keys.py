"""The tool's private key and the signed assertion that buys an access token.

LTI 1.3 services use OAuth2's client-credentials grant with a JWT client assertion
(RFC 7523, IMS Security Framework 4.1): the tool signs {iss, sub: its client id, aud:
the token endpoint, iat, exp, jti} with RS256, and the platform checks the signature
against the public key (JWK) registered for the tool. The key is read from the file or
environment variable course.yml names; it is only ever handed to PyJWT, never printed,
written or passed on.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from grader.config import Course, LtiConfig
from grader.deliver.upload import UploadError

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
LIFETIME_S = 300  # an assertion is used at once; a short life limits a leaked one


def read_key(course: Course) -> rsa.RSAPrivateKey:
    """The private key from lti.key_file or lti.key_env. An environment variable is
    removed once read, so no process started later inherits the key."""
    cfg = lti_config(course)
    if cfg.key_file is None:  # then key_env is set (course.yml gives exactly one)
        pem = os.environ.pop(cfg.key_env or "", "")
        if not pem:
            raise UploadError(f"the environment variable {cfg.key_env} (lti.key_env in "
                              "course.yml) is not set: it must hold the tool's PEM key")
    else:
        try:
            pem = course.path(cfg.key_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UploadError(f"cannot read lti.key_file {cfg.key_file}: "
                              f"{exc.strerror}") from None
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise UploadError("the LTI key is not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise UploadError("the LTI key must be an RSA key: LTI 1.3 signs with RS256")
    return key


def public_jwk(key: rsa.RSAPrivateKey, key_id: str | None) -> dict:
    """The public half as the JWK a platform registers; its kid is lti.key_id or the
    key's RFC 7638 thumbprint, so it stays the same for the same key."""
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    core = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"),
                      sort_keys=True)
    thumbprint = base64.urlsafe_b64encode(hashlib.sha256(core.encode()).digest())
    kid = key_id or thumbprint.rstrip(b"=").decode()
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


def assertion(cfg: LtiConfig, key: rsa.RSAPrivateKey, now: float | None = None) -> str:
    """A fresh client assertion: a new jti every call, since a platform may refuse a
    replayed one (a retried token request included)."""
    issued = int(time.time() if now is None else now)
    claims = {"iss": cfg.client_id, "sub": cfg.client_id,
              "aud": cfg.audience or cfg.token_url, "iat": issued,
              "exp": issued + LIFETIME_S, "jti": uuid.uuid4().hex}
    if cfg.deployment_id:
        claims[DEPLOYMENT_CLAIM] = cfg.deployment_id
    kid = public_jwk(key, cfg.key_id)["kid"]
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def token_form(cfg: LtiConfig, key: rsa.RSAPrivateKey, scopes: tuple[str, ...]) -> dict:
    """The form body of the token request."""
    return {"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion(cfg, key), "scope": " ".join(scopes)}


def lti_config(course: Course) -> LtiConfig:
    """course.yml's `lti:` block, or a clear error when it has none."""
    if course.lti is None:
        raise UploadError("course.yml has no `lti:` block (see docs/course-yml.md)")
    return course.lti
