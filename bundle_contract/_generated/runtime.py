"""Generated from spec/ by `python -m bundle_contract generate`. Do not edit."""

DEV_LINK_PATH = ".bundle-dev.json"  # beside the installed bundle
RECEIPT_ENDPOINT_PATH = ".bundle/hook-receipts.json"  # under the project
RECEIPT_ROUTE_PATH = "/api/trace/receipts"  # the only path a token is posted to
RECEIPT_URL_VARIABLE = "BUNDLE_RECEIPT_URL"  # set for spawned simulations
RECEIPT_TOKEN_VARIABLE = "BUNDLE_RECEIPT_TOKEN"  # set with the one above
HOST_SESSION_VARIABLE = "BUNDLE_DEV_SESSION"  # a receipt's sessionId
PLUGIN_ROOT_VARIABLE = "BUNDLE_PLUGIN_ROOT"  # the installed bundle's root
RECEIPT_BODY_MAX_BYTES = 16384  # limit receipt-body
WRAPPER_POST_MS = 750  # wrapper-post-time
TOKEN_MAX_CHARS = 256  # SessionToken.json
ARTIFACT_SOURCES = "src"  # the project's modules in an artifact
