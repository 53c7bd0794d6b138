"""`grader upload`: send a graded lesson's scores to an LMS through its grade API.

Exports (grader/deliver/export) write files a TA imports by hand; this sends them. Today one
service, LTI 1.3 Assignment and Grade Services (`lti.upload`): `keys` holds the tool's
signing key and the token it buys, `ags` the line item and score requests with their
retries, `sent` the record that makes a resend a no-op.
"""
from __future__ import annotations


class UploadError(Exception):
    """The upload cannot go on (configuration, key, token, line item); the message
    says what to fix and never holds a secret."""
