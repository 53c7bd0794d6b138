"""grader/deliver/upload: the assertion, the key's sources, retries, line items, the sent record.

The platform here is an httpx MockTransport (no socket); tests/e2e/test_lti_upload.py
sends to a real LTI platform implementation over HTTP.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pydantic import ValidationError

from grader.config import Course, Lesson, LtiConfig, Part, Student
from grader.record import ClassScores
from grader.deliver.upload import UploadError, keys
from grader.deliver.upload.ags import Retry, scores_url
from grader.deliver.upload.lti import SENT, upload

BASE = "https://lms.example/api/lti/courses/7"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = KEY.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption()).decode()


def lti_config(**changes) -> LtiConfig:
    return LtiConfig(**{"client_id": "10000000000007", "token_url": f"{BASE}/token",
                        "lineitems_url": f"{BASE}/line_items", "key_env": "TEST_LTI_KEY",
                        **changes})


def course(**lti) -> Course:
    lesson = Lesson(title="MoE", exercise="13_moe.py", solution=Path("s.py"),
                    stub=Path("e.py"), tests=Path("t"), parts={"ffn": Part(points=10)})
    return Course(course="c", lessons={"13": lesson}, lti=lti_config(**lti), roster={
        "alice": Student(lms_id="u1"), "bob": Student(lms_id="u2"), "nolms": Student()})


def scores(**given: float) -> dict:
    return {"lesson": "13", "max_score": 10.0, "students": [
        {"student_id": sid, "score": s, "max_score": 10.0, "status": "graded",
         "problem": "", "parts": {}, "tests": []} for sid, s in given.items()]}


class Platform:
    """A scripted AGS platform: answers by path, records every request."""

    def __init__(self, score_statuses: list[int] | None = None,
                 lineitem_pages: list[list[dict]] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.score_statuses = list(score_statuses or [])
        self.pages = lineitem_pages or [[]]
        self.tokens = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path.endswith("/token"):
            self.tokens += 1
            return httpx.Response(200, json={"access_token": f"tok{self.tokens}",
                                             "token_type": "bearer", "expires_in": 3600})
        if path.endswith("/line_items") and request.method == "GET":
            page = int(request.url.params.get("page", "0"))
            more = page + 1 < len(self.pages)
            link = {"Link": f'<{BASE}/line_items?page={page + 1}>; rel="next"'} if more else {}
            return httpx.Response(200, json=self.pages[page], headers=link)
        if path.endswith("/line_items"):
            return httpx.Response(201, json={**json.loads(request.content),
                                             "id": f"{BASE}/line_items/5"})
        if path.endswith("/scores"):
            status = self.score_statuses.pop(0) if self.score_statuses else 200
            return httpx.Response(status, json={"errors": ["nope"]} if status >= 400 else {},
                                  headers={"Retry-After": "2"} if status == 429 else {})
        return httpx.Response(404)

    def posted(self, suffix: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "POST" and r.url.path.endswith(suffix)]


@pytest.fixture
def key_env(monkeypatch):
    monkeypatch.setenv("TEST_LTI_KEY", PEM)


def run(tmp_path: Path, platform: Platform, doc: dict, sleeps: list | None = None,
        **options):
    client = httpx.Client(transport=httpx.MockTransport(platform))
    retry = Retry(sleep=(sleeps if sleeps is not None else []).append)
    return upload(options.pop("the_course", None) or course(), "13",
                  ClassScores.from_json(doc), tmp_path,
                  client=client, retry=retry, **options)


# ------------------------------------------------------------------ the assertion

def test_assertion_claims_and_signature():
    cfg = lti_config(deployment_id="d1")
    token = keys.assertion(cfg, KEY, now=1_700_000_000)
    claims = jwt.decode(token, KEY.public_key(), algorithms=["RS256"], audience=cfg.token_url,
                        options={"verify_exp": False, "verify_iat": False})
    assert claims["iss"] == claims["sub"] == cfg.client_id
    assert claims["exp"] - claims["iat"] == keys.LIFETIME_S and claims["iat"] == 1_700_000_000
    assert claims[keys.DEPLOYMENT_CLAIM] == "d1"
    assert jwt.get_unverified_header(token)["kid"] == keys.public_jwk(KEY, None)["kid"]
    assert keys.assertion(cfg, KEY) != keys.assertion(cfg, KEY)  # a fresh jti each time
    other = lti_config(audience="https://lms.example")
    assert jwt.decode(keys.assertion(other, KEY), KEY.public_key(), algorithms=["RS256"],
                      audience="https://lms.example")["sub"] == cfg.client_id


def test_default_kid_is_the_rfc7638_thumbprint():
    jwcrypto = pytest.importorskip("jwcrypto.jwk")
    public = KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    assert keys.public_jwk(KEY, None)["kid"] == jwcrypto.JWK.from_pem(public).thumbprint()
    assert keys.public_jwk(KEY, "k-2026")["kid"] == "k-2026"
    assert "d" not in keys.public_jwk(KEY, None)  # the public half only


# ------------------------------------------------------------------ the key's sources

def test_key_from_env_is_removed_once_read(key_env):
    assert keys.read_key(course()).private_numbers() == KEY.private_numbers()
    assert "TEST_LTI_KEY" not in os.environ  # no child started later inherits it


def test_missing_or_wrong_keys_are_named_not_shown(tmp_path, monkeypatch):
    with pytest.raises(UploadError, match="TEST_LTI_KEY .* is not set"):
        keys.read_key(course())
    c = course(key_env=None, key_file=Path("nope.pem")).model_copy(update={"root": tmp_path})
    with pytest.raises(UploadError, match="cannot read lti.key_file nope.pem"):
        keys.read_key(c)
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    monkeypatch.setenv("TEST_LTI_KEY", ec_pem)
    with pytest.raises(UploadError, match="must be an RSA key") as info:
        keys.read_key(course())
    assert ec_pem.splitlines()[1] not in str(info.value)


@pytest.mark.parametrize("given", [{}, {"key_env": "A", "key_file": "k.pem"}])
def test_exactly_one_key_source(given):
    fields = {"client_id": "c", "token_url": "https://x/t", "lineitems_url": "https://x/l"}
    with pytest.raises(ValidationError, match="exactly one of key_file and key_env"):
        LtiConfig(**fields, **given)


# ------------------------------------------------------------------ sending

def test_scores_go_to_the_new_line_item_with_the_score_type(tmp_path, key_env):
    platform = Platform()
    done = run(tmp_path, platform, scores(alice=9.5, bob=3.0))
    assert done.sent == ["alice", "bob"] and done.lineitem == f"{BASE}/line_items/5"
    (created,) = platform.posted("/line_items")
    assert json.loads(created.content) == {"scoreMaximum": 10.0, "label": "Lesson 13 MoE",
                                           "resourceId": "c:lesson-13"}
    posted = platform.posted("/scores")
    assert {r.headers["Content-Type"] for r in posted} == {
        "application/vnd.ims.lis.v1.score+json"}
    assert {r.headers["Authorization"] for r in posted} == {"Bearer tok1"}
    assert [json.loads(r.content)["userId"] for r in posted] == ["u1", "u2"]
    assert json.loads((tmp_path / "export" / SENT).read_text())


def test_resend_makes_no_request_and_force_sends_again(tmp_path, key_env, monkeypatch):
    run(tmp_path, Platform(), scores(alice=9.5))
    platform = Platform()
    done = run(tmp_path, platform, scores(alice=9.5))
    assert platform.requests == [] and done.unchanged == ["alice"] and done.sent == []
    monkeypatch.setenv("TEST_LTI_KEY", PEM)
    done = run(tmp_path, platform, scores(alice=9.5), force=True)
    assert done.sent == ["alice"] and len(platform.posted("/scores")) == 1


def test_existing_line_item_is_found_on_a_later_page(tmp_path, key_env):
    mine = {"id": f"{BASE}/line_items/3?type=x", "resourceId": "c:lesson-13"}
    platform = Platform(lineitem_pages=[[{"id": "other", "resourceId": "c:lesson-12"}],
                                        [mine]])
    done = run(tmp_path, platform, scores(alice=1.0))
    assert platform.posted("/line_items") == []
    assert done.lineitem == mine["id"]
    assert str(platform.posted("/scores")[0].url) == f"{BASE}/line_items/3/scores?type=x"


def test_retry_honours_retry_after_then_names_the_refused(tmp_path, key_env, monkeypatch):
    sleeps: list[float] = []
    platform = Platform(score_statuses=[429, 200, 503, 503, 503, 503, 503, 422])
    done = run(tmp_path, platform, scores(alice=1.0, bob=2.0), sleeps)
    assert done.sent == ["alice"]
    assert done.refused == [("bob", '503 Service Unavailable: {"errors":["nope"]}')]
    assert sleeps == [2.0, 0.5, 1.0, 2.0, 4.0]  # Retry-After, then doubling
    # the sent record keeps alice only: bob is tried again next time
    platform = Platform(score_statuses=[422])
    monkeypatch.setenv("TEST_LTI_KEY", PEM)
    done = run(tmp_path, platform, scores(alice=1.0, bob=2.0))
    assert done.unchanged == ["alice"] and done.refused[0][0] == "bob"
    assert done.refused[0][1].startswith("422 Unprocessable")


def test_an_expired_token_is_renewed_once(tmp_path, key_env):
    platform = Platform(score_statuses=[401, 200])
    done = run(tmp_path, platform, scores(alice=1.0))
    assert done.sent == ["alice"] and platform.tokens == 2
    assert platform.posted("/scores")[-1].headers["Authorization"] == "Bearer tok2"


def test_students_without_an_lti_user_id_are_named_not_sent(tmp_path, key_env):
    platform = Platform()
    done = run(tmp_path, platform, scores(alice=1.0, nolms=2.0, stranger=3.0))
    assert done.sent == ["alice"]
    assert [s for s, _ in done.skipped] == ["nolms", "stranger"]
    assert len(platform.posted("/scores")) == 1


def test_dry_run_makes_no_request_and_needs_no_key(tmp_path):
    platform = Platform()
    done = run(tmp_path, platform, scores(alice=1.0, bob=2.0), dry_run=True)
    assert platform.requests == [] and [b["userId"] for b in done.planned] == ["u1", "u2"]
    assert not (tmp_path / "export").exists()


def test_scores_url_keeps_the_query():
    assert scores_url("https://m.example/mod/lti/services.php/2/lineitems/9/lineitem"
                      "?type_id=1") == ("https://m.example/mod/lti/services.php/2/lineitems/"
                                        "9/lineitem/scores?type_id=1")
    assert scores_url(f"{BASE}/line_items/5/") == f"{BASE}/line_items/5/scores"
