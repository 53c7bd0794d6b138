"""`grader upload --to lti` as a TA runs it, against an LTI 1.3 platform on 127.0.0.1.

The platform is the `lti1p3platform` package (a maintained platform-side LTI 1.3
implementation): its token endpoint (client-credentials grant, the assertion's
signature checked against the tool's JWKS by kid and alg), its bearer-token check and
its AGS line item and score handlers. It leaves some of what the specifications
require unchecked (the assertion's aud, iss/sub, expiry and jti replay; the request
content types; the score's fields: "TODO: validate score"), so the HTTP layer below
checks those before handing the request to it. Each test starts its own server on a
random port and stops it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

lti1p3 = pytest.importorskip("lti1p3platform")
from jwcrypto.jwk import JWK  # noqa: E402  (lti1p3platform's own dependency)
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract  # noqa: E402 - after importorskip
from lti1p3platform.registration import Registration  # noqa: E402 - after importorskip
from lti1p3platform.request import Request  # noqa: E402 - after importorskip
from lti1p3platform.score import UpdateScoreStatus  # noqa: E402 - after importorskip
from lti1p3platform.service_connector import AssignmentsGradesService  # noqa: E402 - after importorskip

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "minimind-grader-tool"
ISSUER = "https://platform.example"
SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
ACTIVITY = {"Initialized", "Started", "InProgress", "Submitted", "Completed"}
GRADING = {"FullyGraded", "Pending", "PendingManual", "Failed", "NotReady"}
# the platform's users (LTI user ids); a score for anyone else is not applied (403)
MEMBERS = {"4001", "4002", "4003"}


def pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def tool_jwks(key: rsa.RSAPrivateKey) -> dict:
    """The tool's key as registered with the platform, made with jwcrypto (not the
    grader's code), kid = its RFC 7638 thumbprint."""
    jwk = JWK.from_pem(public_pem(key).encode())
    return {"keys": [{**json.loads(jwk.export_public()), "kid": jwk.thumbprint(),
                      "alg": "RS256", "use": "sig"}]}


class PlatformConf(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, platform_key: rsa.RSAPrivateKey, tool_key_set: dict,
                             **_) -> None:
        self._registration = (Registration().set_iss(ISSUER).set_client_id(CLIENT_ID)
                              .set_deployment_id("1")
                              .set_platform_public_key(public_pem(platform_key))
                              .set_platform_private_key(pem(platform_key))
                              .set_tool_key_set(tool_key_set))

    def get_registration_by_params(self, **_) -> Registration:
        return self._registration


class Gradebook:
    """What the platform holds: line items and the scores posted to them."""

    def __init__(self) -> None:
        self.lineitems: dict[str, dict] = {}
        self.scores: dict[str, dict[str, dict]] = {}  # line item id -> user -> score

    def add(self, base: str, item: dict) -> dict:
        ident = str(len(self.lineitems) + 1)
        self.lineitems[ident] = {**item, "id": f"{base}/lineitems/{ident}"}
        self.scores[ident] = {}
        return self.lineitems[ident]


def ags_service(request: Request, conf: PlatformConf, book: Gradebook, base: str):
    """lti1p3platform's AGS service over the in-memory gradebook."""

    class Service(AssignmentsGradesService):
        def find_lineitems(self, page=1, limit=None, line_item_id=None,
                           resource_link_id=None, resource_id=None, tag=None, **_):
            items = [i for i in book.lineitems.values()
                     if resource_id is None or i.get("resourceId") == resource_id]
            return {"content": items, "has_next": False, "next": None}

        def find_lineitem(self, line_item_id):
            return book.lineitems[line_item_id]

        def create_lineitem(self, creation_data):
            return book.add(base, creation_data)

        def update_lineitem(self, update_data):
            raise NotImplementedError

        def delete_lineitem(self, line_item_id):
            raise NotImplementedError

        def update_score(self, line_item_id, score):
            if score["userId"] not in MEMBERS:
                return UpdateScoreStatus.NOTAPPLIED
            book.scores[line_item_id][score["userId"]] = score
            return UpdateScoreStatus.SUCCESS

        def get_results(self, line_item_id, page=1, limit=None, user_id=None):
            raise NotImplementedError

    return Service(request, conf, f"{base}/lineitems")


class HttpRequest(Request):
    def build_metadata(self, handler: Handler) -> dict:
        split = urlsplit(handler.path)
        return {"method": handler.command, "form_data": {}, "path": split.path,
                "get_data": dict(parse_qsl(split.query)), "headers": dict(handler.headers),
                "content_type": handler.headers.get("Content-Type"),
                "json": json.loads(handler.body) if handler.body else None}


class Handler(BaseHTTPRequestHandler):
    """The spec's checks, then lti1p3platform; every request is logged in `seen`."""
    server: Server

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.handle_any()

    def do_POST(self) -> None:
        self.handle_any()

    def handle_any(self) -> None:
        srv = self.server
        self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path
        srv.seen.append((self.command, path))
        if srv.faults and path.endswith("/scores"):
            return self.reply(srv.faults.pop(0), {"error": "try later"})
        try:
            if path == "/token":
                return self.token()
            self.check_bearer(path)
            service = ags_service(HttpRequest(self), srv.conf, srv.book, srv.base)
            if path == "/lineitems" and self.command == "GET":
                resp = service.handle_get_lineitems()
            elif path == "/lineitems":
                expect(self.headers.get("Content-Type") == LINEITEM_TYPE, "line item type")
                resp = service.handle_create_lineitem()
            elif path.endswith("/scores"):
                expect(self.headers.get("Content-Type") == SCORE_TYPE, "score content type")
                check_score(json.loads(self.body))
                resp = service.handle_update_score(path.split("/")[2])
            else:
                return self.reply(404, {"error": "no such endpoint"})
        except Rejected as exc:
            return self.reply(exc.status, {"error": str(exc)})
        result = resp.result if isinstance(resp.result, (dict, list)) else {"status": resp.message}
        if isinstance(result, dict) and "content" in result:
            result = result["content"]  # the container is a JSON array
        self.reply(resp.code, result)

    def token(self) -> None:
        form = dict(parse_qsl(self.body.decode()))
        expect(form.get("grant_type") == "client_credentials", "grant_type")
        expect(form.get("client_assertion_type") ==
               "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", "assertion type")
        scopes = set(form.get("scope", "").split())
        expect({SCOPE + "score", SCOPE + "lineitem"} <= scopes, "scopes")
        check_assertion(form.get("client_assertion", ""), self.server)
        try:
            answer = self.server.conf.get_access_token(form)
        except Exception as exc:  # the library's own refusal: a bad signature, kid, claim
            raise Rejected(f"lti1p3platform refused the assertion: {exc!r}", 401) from None
        self.server.tokens.append(answer["access_token"])
        self.reply(200, answer)

    def check_bearer(self, path: str) -> None:
        auth = self.headers.get("Authorization", "")
        expect(auth.startswith("Bearer "), "bearer token", 401)
        claims = jwt.decode(auth[7:], public_pem(self.server.platform_key),
                            algorithms=["RS256"])
        need = SCOPE + ("score" if path.endswith("/scores") else "lineitem")
        expect(need in claims["scopes"].split(), f"scope {need}", 403)

    def reply(self, status: int, body) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class Rejected(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def expect(ok: bool, what: str, status: int = 400) -> None:
    if not ok:
        raise Rejected(f"bad {what}", status)


def check_assertion(token: str, srv: Server) -> None:
    """RFC 7523 / IMS Security Framework 4.1: signed by the registered key, iss = sub
    = client id, aud = the token endpoint, unexpired, jti never seen before."""
    header = jwt.get_unverified_header(token)
    key = next((k for k in srv.jwks["keys"] if k["kid"] == header.get("kid")), None)
    expect(key is not None and header.get("alg") == "RS256", "kid/alg", 401)
    try:
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["RS256"],
                            audience=srv.base + "/token",
                            options={"require": ["iss", "sub", "aud", "iat", "exp", "jti"]})
    except jwt.PyJWTError as exc:
        raise Rejected(f"assertion: {exc}", 401) from None
    expect(claims["iss"] == claims["sub"] == CLIENT_ID, "iss/sub", 401)
    expect(claims["iat"] <= time.time() + 5 and claims["exp"] - claims["iat"] <= 3600,
           "iat/exp", 401)
    expect(claims["jti"] not in srv.jtis, "replayed jti", 401)
    srv.jtis.add(claims["jti"])


def check_score(score: dict) -> None:
    """AGS 2.0 score: the fields, their types and the rules between them."""
    expect(isinstance(score.get("userId"), str) and score["userId"], "userId")
    expect(score.get("activityProgress") in ACTIVITY, "activityProgress")
    expect(score.get("gradingProgress") in GRADING, "gradingProgress")
    stamp = datetime.fromisoformat(score["timestamp"].replace("Z", "+00:00"))
    expect(stamp.tzinfo is not None, "timestamp")
    if "scoreGiven" in score:
        expect(isinstance(score["scoreGiven"], (int, float)) and score["scoreGiven"] >= 0,
               "scoreGiven")
        expect(isinstance(score.get("scoreMaximum"), (int, float))
               and score["scoreMaximum"] > 0, "scoreMaximum")


class Server(ThreadingHTTPServer):
    def __init__(self, tool_key: rsa.RSAPrivateKey) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server_address[1]}"
        self.platform_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.jwks = tool_jwks(tool_key)
        self.conf = PlatformConf(platform_key=self.platform_key, tool_key_set=self.jwks)
        self.book = Gradebook()
        self.seen: list[tuple[str, str]] = []
        self.jtis: set[str] = set()
        self.tokens: list[str] = []
        self.faults: list[int] = []  # statuses the next score POSTs get instead


@pytest.fixture(scope="module")
def tool_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def platform(tool_key):
    srv = Server(tool_key)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


def student(sid: str, score: float, status: str = "graded") -> dict:
    return {"student_id": sid, "score": score, "max_score": 10.0, "status": status,
            "problem": "", "parts": {"ffn": {"score": score, "max_score": 10.0}},
            "tests": []}


@pytest.fixture
def course_dir(tmp_path, tool_key, platform) -> Path:
    """A course whose roster maps students to the platform's users; zed is not one."""
    (tmp_path / "t").mkdir()
    (tmp_path / "s.py").write_text("")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "tool.pem").write_text(pem(tool_key))
    (tmp_path / "course.yml").write_text(f"""
course: minimind-test
roster:
  alice: {{lms_id: "4001"}}
  bob: {{lms_id: "4002"}}
  carol: {{lms_id: "4003"}}
  zed: {{lms_id: "9999"}}
lti:
  client_id: {CLIENT_ID}
  token_url: {platform.base}/token
  lineitems_url: {platform.base}/lineitems
  deployment_id: "1"
  key_file: keys/tool.pem
lessons:
  "13": {{title: MoE, exercise: 13_moe.py, solution: s.py, stub: e.py, tests: t,
          parts: {{ffn: {{points: 10}}}}}}
""")
    write_scores(tmp_path / "out", [student("alice", 9.5), student("bob", 0.0, "missing"),
                                    student("carol", 10.0)])
    return tmp_path


def write_scores(out: Path, students: list[dict]) -> None:
    out.mkdir(exist_ok=True)
    (out / "scores.json").write_text(json.dumps(
        {"lesson": "13", "course": "minimind-test", "max_score": 10.0, "version": "v",
         "students": students}))


def upload(course_dir: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader.cli", "upload", "--course",
                           str(course_dir / "course.yml"), "--lesson", "13", "--to", "lti",
                           "--out", str(course_dir / "out"), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def received(platform: Server) -> dict[str, dict]:
    (scores,) = platform.book.scores.values()
    return scores


def test_scores_arrive_and_a_resend_sends_nothing(platform, course_dir):
    proc = upload(course_dir)
    assert proc.returncode == 0, proc.stderr
    (item,) = platform.book.lineitems.values()
    assert item["resourceId"] == "minimind-test:lesson-13" and item["scoreMaximum"] == 10.0
    got = received(platform)
    assert {u: s.get("scoreGiven") for u, s in got.items()} == {
        "4001": 9.5, "4002": None, "4003": 10.0}  # bob's missing submission stays blank
    assert got["4002"]["gradingProgress"] == "NotReady"
    assert got["4001"]["gradingProgress"] == "FullyGraded"
    assert got["4001"]["activityProgress"] == "Completed"
    assert "sent 3; unchanged 0; refused 0" in proc.stdout

    before = len(platform.seen)
    again = upload(course_dir)
    assert again.returncode == 0, again.stderr
    assert len(platform.seen) == before  # no token, no line item, no score
    assert "sent 0; unchanged 3" in again.stdout


def test_only_a_changed_score_is_sent_to_the_same_line_item(platform, course_dir):
    assert upload(course_dir).returncode == 0
    write_scores(course_dir / "out", [student("alice", 9.5), student("bob", 0.0, "missing"),
                                      student("carol", 7.25)])
    platform.seen.clear()
    proc = upload(course_dir)
    assert proc.returncode == 0, proc.stderr
    assert [r for r in platform.seen if r[1].endswith("/scores")] == [
        ("POST", "/lineitems/1/scores")]
    assert ("POST", "/lineitems") not in platform.seen  # found, not created again
    assert len(platform.book.lineitems) == 1
    assert received(platform)["4003"]["scoreGiven"] == 7.25


def test_a_refused_student_is_named_and_tried_again_next_time(platform, course_dir):
    write_scores(course_dir / "out", [student("alice", 9.5), student("zed", 4.0)])
    proc = upload(course_dir)
    assert proc.returncode == 1
    assert "refused by the platform (1):" in proc.stderr
    assert "zed: 403" in proc.stderr and "alice" not in proc.stderr
    assert set(received(platform)) == {"4001"}
    platform.seen.clear()
    upload(course_dir)
    assert [r for r in platform.seen if r[1].endswith("/scores")] == [
        ("POST", "/lineitems/1/scores")]  # zed again, alice not


def test_a_busy_platform_is_retried(platform, course_dir):
    platform.faults = [503, 429]
    proc = upload(course_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(received(platform)) == 3
    assert sum(r[1].endswith("/scores") for r in platform.seen) == 5


def test_dry_run_sends_nothing_and_shows_every_score(platform, course_dir):
    proc = upload(course_dir, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert platform.seen == []
    bodies = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert {b["userId"]: b.get("scoreGiven") for b in bodies} == {
        "4001": 9.5, "4002": None, "4003": 10.0}
    assert "would send 3; unchanged 0" in proc.stdout
    assert not (course_dir / "out" / "export" / "lti_sent.json").exists()


def test_the_key_never_reaches_out_or_the_output(platform, course_dir, tool_key):
    key_text = pem(tool_key)
    (course_dir / "keys" / "tool.pem").unlink()
    text = (course_dir / "course.yml").read_text()
    (course_dir / "course.yml").write_text(text.replace("key_file: keys/tool.pem",
                                                        "key_env: MINIMIND_LTI_KEY"))
    runs = [upload(course_dir, "--dry-run", env={"MINIMIND_LTI_KEY": key_text}),
            upload(course_dir, env={"MINIMIND_LTI_KEY": key_text})]
    assert runs[1].returncode == 0, runs[1].stderr
    assert len(received(platform)) == 3
    body = "".join(key_text.splitlines()[1:-1])
    needles = [key_text.splitlines()[1], body[200:260], platform.tokens[0]]
    for f in (p for p in (course_dir / "out").rglob("*") if p.is_file()):
        content = f.read_text(errors="replace")
        assert not [n for n in needles if n in content], f
    for proc in runs:
        assert not [n for n in needles if n in proc.stdout + proc.stderr]


def test_an_unregistered_key_is_refused_by_the_platform(platform, course_dir):
    """The platform really checks the signature: another key gets no token."""
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (course_dir / "keys" / "tool.pem").write_text(pem(other))
    proc = upload(course_dir)
    assert proc.returncode == 1
    assert "refused the token request: 401" in proc.stderr
    assert platform.book.scores == {}
