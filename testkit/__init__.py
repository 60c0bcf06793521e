"""Dev-only code that both the test suite (tests/) and the benchmarks (bench/) use, so that
neither imports the other: the fake protocol peers (a fake OpenAI-compatible server, a fake
Telegram Bot API server, a fake DingTalk peer, a deterministic fake embedder, in-memory
storage backends) and the drivers a test asserts on and a bench measures with (a running
bot over the fakes, the load driver).

Never shipped: pyproject's package list leaves it out; it is linted like tests/ and bench/.
"""
