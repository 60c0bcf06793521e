"""chatmem's memory core: scoped, scored, file-backed long-term memory for chat bots.

The core never imports a front end (Telegram, DingTalk, Textual); front ends import it.
"""

__version__ = "0.1.0"
