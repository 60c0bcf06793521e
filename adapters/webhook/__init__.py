"""The toolkit a webhook front end is built on: a platform posts signed requests, chatmem
answers at once and replies later by posting to the platform.

- `origins`: where replies may go (an allowlist of origins, pure);
- `signing`: a signature checked with a replay window, each signed pair accepted once;
- `server`: `WebhookServer`, the aiohttp app that runs those checks, caps the body,
  answers now and works later, one chat at a time, and sends replies with retries;
- `Platform` (in `server`): the small object a front end writes, saying how its
  requests are verified and parsed and how a reply is sent.

This package imports nothing heavy on its own: `server` pulls in aiohttp.
"""
