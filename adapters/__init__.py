"""The front ends over the core: the command line (`adapters/cli`), the bots (Telegram,
DingTalk, the console), the MCP server and the webhook toolkit new front ends are built on
(`adapters/webhook`). Each turns a platform's messages into `InboundMessage`s for the one
router (`adapters/router.py`) and imports only the core's public API
(`memory_core.PUBLIC_API`), so a front end can change without the core knowing of it.
"""
