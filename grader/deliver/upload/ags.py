"""Assignment and Grade Services requests: token, line item, scores, with retries.

A request answered 429 or 5xx, or not answered, is tried again after a back-off
(Retry-After when the platform gives one, else doubling), a bounded number of times.
The bearer token is fetched on first use and once more if the platform stops
accepting it (401), which a long class can outlast. No header is ever printed.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa

from grader.config import LtiConfig
from grader.deliver.upload import UploadError
from grader.deliver.upload.keys import token_form

SCOPES = ("https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
          "https://purl.imsglobal.org/spec/lti-ags/scope/score")
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
CONTAINER_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
RETRIED = frozenset({429, 500, 502, 503, 504})
MAX_PAGES = 100  # of line items: a course has a few dozen


@dataclass
class Retry:
    """How often and how long to wait; `sleep` is swapped out by tests."""
    attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep)

    def delay(self, attempt: int, resp: httpx.Response | None) -> float:
        after = resp.headers.get("Retry-After", "") if resp is not None else ""
        wait = float(after) if after.isdigit() else self.base_s * 2 ** attempt
        return min(wait, self.cap_s)


class Refused(Exception):
    """The platform answered a request with an error, or never answered."""


def scores_url(lineitem: str) -> str:
    """`{lineitem}/scores`, the path extended and any query kept (Moodle's line item
    URLs carry one)."""
    parts = urlsplit(lineitem)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def why(resp: httpx.Response) -> str:
    """A refusal in one line: status and the start of the platform's answer."""
    text = " ".join(resp.text.split())[:200]
    return f"{resp.status_code} {resp.reason_phrase}" + (f": {text}" if text else "")


class Platform:
    """One tool registration on one platform, as seen through its AGS endpoints."""

    def __init__(self, client: httpx.Client, cfg: LtiConfig, key: rsa.RSAPrivateKey,
                 retry: Retry) -> None:
        self.client, self.cfg, self.key, self.retry = client, cfg, key, retry
        self._token: str | None = None

    def _send(self, make: Callable[[], httpx.Request]) -> httpx.Response:
        """Send a freshly built request until it is answered without 429/5xx."""
        for attempt in range(self.retry.attempts):
            last = attempt == self.retry.attempts - 1
            try:
                resp = self.client.send(make())
            except httpx.TransportError as exc:
                if last:
                    raise Refused(f"no answer: {type(exc).__name__}") from None
                self.retry.sleep(self.retry.delay(attempt, None))
                continue
            if resp.status_code not in RETRIED or last:
                return resp
            self.retry.sleep(self.retry.delay(attempt, resp))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _fetch_token(self) -> str:
        try:
            resp = self._send(lambda: self.client.build_request(
                "POST", self.cfg.token_url, data=token_form(self.cfg, self.key, SCOPES)))
        except Refused as exc:
            raise UploadError(f"token request to {self.cfg.token_url}: {exc}") from None
        if resp.status_code != 200:
            raise UploadError(f"the platform refused the token request: {why(resp)}")
        try:
            return resp.json()["access_token"]
        except (ValueError, KeyError, TypeError):
            raise UploadError("the token answer holds no access_token") from None

    def call(self, method: str, url: str, headers: dict | None = None,
             **kw) -> httpx.Response:
        """An authorised request; a 401 buys a new token and is tried once more."""
        for fresh in (False, True):
            if self._token is None or fresh:
                self._token = self._fetch_token()
            auth = {**(headers or {}), "Authorization": f"Bearer {self._token}"}
            resp = self._send(functools.partial(self.client.build_request,
                                                method, url, headers=auth, **kw))
            if resp.status_code != 401:
                return resp
        return resp

    def lineitem(self, label: str, resource_id: str, maximum: float) -> str:
        """The URL of the line item whose resourceId is ours, created when none is."""
        url: str | None = self.cfg.lineitems_url
        params: dict | None = {"resource_id": resource_id}
        for _ in range(MAX_PAGES):
            if url is None:
                break
            resp = self._request("GET", url, "list line items", params=params,
                                 headers={"Accept": CONTAINER_TYPE})
            items = resp.json()
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("resourceId") == resource_id:
                    return str(item["id"])
            url, params = resp.links.get("next", {}).get("url"), None
        body = {"scoreMaximum": maximum, "label": label, "resourceId": resource_id}
        resp = self._request("POST", self.cfg.lineitems_url, "create the line item",
                             json=body, headers={"Content-Type": LINEITEM_TYPE,
                                                 "Accept": LINEITEM_TYPE})
        return str(resp.json()["id"])

    def _request(self, method: str, url: str, what: str, **kw) -> httpx.Response:
        try:
            resp = self.call(method, url, **kw)
        except Refused as exc:
            raise UploadError(f"could not {what}: {exc}") from None
        if not resp.is_success:
            raise UploadError(f"could not {what}: {why(resp)}")
        return resp

    def post_score(self, lineitem: str, score: dict) -> None:
        """POST one score; raises Refused with the platform's reason."""
        resp = self.call("POST", scores_url(lineitem), json=score,
                         headers={"Content-Type": SCORE_TYPE})
        if not resp.is_success:
            raise Refused(why(resp))
