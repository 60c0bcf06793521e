"""Seeded, realistic bilingual chat-memory text for the benches.

A handful of template slot words makes every word occur in several per cent of all
chunks, which no real chat history does, and it flatters or punishes a BM25 index in
ways real data would not.  Here the frames are filled from large vocabularies sampled by
real word frequencies:

* Chinese nouns, verbs, adjectives, places, organisations and time words from jieba's
  dictionary (`dict.txt`: `word freq pos`), sampled proportionally to `freq ** 0.8`;
* English words counted in the prose (docstrings and comments) of Python's standard
  library, sampled by their counts, plus a short list of everyday chat words with a Zipf
  (1/rank) profile, so English is not only about programming;
* generated people's names (Chinese full names and nicknames, English first names),
  numbers, prices, dates and times, product and tech names, version numbers, ticket and
  PR numbers, commit hashes, code identifiers and file paths.

Chunks are 20-120 characters, like daily notes, memories or chat messages: about half
Chinese, a quarter English and a quarter mixed.  Everything is a pure function of the
seed (and of the two word sources shipped with jieba and Python).

Exports: `sentences`, `queries` (and `query_targets`, the same queries
with the index of the sentence each was made from), `memory_entries`.

Run `python bench/corpus.py [--quick]` to print vocabulary statistics.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import importlib.util
import itertools
import math
import os
import random
import re
import statistics
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_core.base import text as mtext
from memory_core.base.entries import CATEGORIES, ArchiveReason, MemoryEntry

SEED = 20260601
MIN_CHARS = 20
MAX_CHARS = 120

Rng = random.Random
Slot = Callable[[Rng], str]


# ---------------------------------------------------------------------------
# Weighted vocabularies


class Vocab:
    """Words with cumulative weights; `pick` is one bisect."""

    __slots__ = ("cum", "total", "words")

    def __init__(self, weighted: Sequence[tuple[str, float]]) -> None:
        if not weighted:
            raise ValueError("empty vocabulary")
        self.words = [w for w, _ in weighted]
        self.cum = list(itertools.accumulate(weight for _, weight in weighted))
        self.total = self.cum[-1]

    def pick(self, rng: Rng) -> str:
        return self.words[bisect.bisect_right(self.cum, rng.random() * self.total)]

    def __len__(self) -> int:
        return len(self.words)


def zipf(words: Sequence[str], offset: float = 2.0) -> Vocab:
    """A hand-made list in rough frequency order, weighted 1 / (rank + offset)."""
    return Vocab([(w, 1.0 / (rank + offset)) for rank, w in enumerate(words)])


_HAN_WORD = re.compile(r"^[\u4e00-\u9fff]{1,4}$")
_ZH_GROUPS = {
    "n": ("n", "nz", "vn"),
    "nr": ("nr",),
    "ns": ("ns",),
    "nt": ("nt",),
    "v": ("v",),
    "a": ("a",),
    "t": ("t",),
}


def jieba_dict_path() -> Path:
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        raise SystemExit("jieba is not installed (it is a dependency of chatmem)")
    return Path(spec.origin).parent / "dict.txt"


@functools.cache
def zh_vocab() -> dict[str, Vocab]:
    """Chinese words by part of speech, weighted freq ** 0.8, stopwords left out."""
    zh_stop, _ = mtext._stopwords()
    by_pos = {pos: group for group, tags in _ZH_GROUPS.items() for pos in tags}
    weighted: dict[str, list[tuple[str, float]]] = {group: [] for group in _ZH_GROUPS}
    with open(jieba_dict_path(), encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) != 3:
                continue
            word, freq, pos = parts
            group = by_pos.get(pos)
            if group is None or not _HAN_WORD.match(word) or word in zh_stop:
                continue
            if len(word) == 1 and group != "v" and group != "a":
                continue
            weighted[group].append((word, float(freq) ** 0.8))
    return {group: Vocab(items) for group, items in weighted.items()}


_DOC_RE = re.compile(r'"""(.*?)"""|#\s([^\n]*)', re.S)
_EN_WORD_RE = re.compile(r"\b[A-Za-z][a-z]{2,}\b")


def _words(text: str) -> list[str]:
    return text.split()


_SKIP_STDLIB = {"test", "tests", "site-packages", "idlelib", "lib2to3", "tkinter", "turtledemo"}

EVERYDAY_EN = _words(
    """
time day week home work people family friend phone dinner lunch breakfast coffee tea
weekend morning night trip flight hotel train car kids school doctor birthday party
movie music book game gym run walk dog cat food beer wine pizza cake restaurant city
house room kitchen money bank price gift shop store plan meeting office boss team
project deadline email message call photo camera bike weather rain snow summer winter
spring holiday vacation beach mountain park garden river lake sister brother
mother father daughter son wife husband baby grandma grandpa uncle aunt cousin
neighbor roommate colleague teacher student class exam homework library hospital
dentist medicine headache cold fever sleep dream tired happy busy sick hungry late
early tomorrow yesterday tonight today monday tuesday wednesday thursday friday
saturday sunday january february march april may june july august september october
november december airport ticket passport visa luggage taxi bus subway map street
address apartment rent salary interview job career promotion contract budget invoice
receipt tax insurance laptop keyboard monitor charger battery headphones speaker
screen printer router wifi password account login app update backup cloud storage
folder document spreadsheet slides report notes calendar reminder alarm schedule
appointment reservation order delivery package shipping refund discount coupon
subscription membership concert show museum gallery theater festival wedding
anniversary funeral graduation picnic barbecue soup rice noodles dumplings salad
sandwich burger steak chicken fish shrimp tofu egg milk cheese bread fruit apple
banana orange grape strawberry chocolate sugar salt spicy sweet sour bitter allergy
peanut gluten vegetarian vegan diet weight yoga swimming hiking cycling tennis
football basketball badminton chess guitar piano painting drawing cooking baking
reading writing photography gardening fishing camping
"""
)

EN_NAMES = _words(
    """
Alice Bob Carol David Emma Frank Grace Henry Irene Jack Kate Leo Mia Nina Oscar Paul
Quinn Rosa Sam Tina Uma Victor Wendy Xavier Yuki Zoe Aiden Bella Chloe Daniel Ethan
Fiona George Hannah Isaac Julia Kevin Laura Mason Nora Olivia Peter Rachel Sophie Tom
Vera Will Amy Ben Claire Dylan Eva Felix Gina Hugo Ivy Jake Liam Lucy Max Noah Owen
Priya Raj Ravi Sara Tim Yara Zack Anya Boris Chen Dmitri Elena Farah Hiro Ines Jonas
Kenji Lena Marco Nadia Omar Pablo Rita Stefan Theo Wei Xin
"""
)

TECH = _words(
    """
Python Rust Go Java TypeScript JavaScript Kotlin Swift C++ PostgreSQL MySQL SQLite
Redis Kafka RabbitMQ Kubernetes Docker Terraform Ansible nginx Grafana Prometheus
Elasticsearch ClickHouse MongoDB Cassandra DynamoDB S3 Lambda GitHub GitLab Jenkins
CircleCI pytest FastAPI Django Flask SQLAlchemy pandas numpy PyTorch TensorFlow React
Vue Svelte Angular Next.js Node.js Deno Bun webpack Vite Tailwind Bootstrap Linux
Ubuntu Debian macOS Windows Android iOS Xcode VSCode Vim Emacs IntelliJ PyCharm Jira
Confluence Notion Obsidian Slack Zoom Figma Postman Sentry Datadog Cloudflare Vercel
Heroku AWS GCP Azure OpenAI ChatGPT Claude Llama Whisper Ollama LangChain Airflow
Spark Hadoop Flink dbt Snowflake BigQuery Tableau Excel Word PowerPoint Keynote Zotero
LaTeX Markdown gRPC GraphQL OAuth JWT WebSocket HTTP TLS DNS CDN VPN SSH Git Bazel
CMake Gradle Maven npm pip uv poetry conda Celery Gunicorn uvicorn asyncio Tokio Axum
Actix Serde WASM
"""
)

PRODUCTS = _words(
    """
iPhone MacBook iPad AirPods Kindle Switch PS5 Xbox Steam 微信 钉钉 飞书 支付宝 淘宝
京东 美团 抖音 小红书 B站 知乎 滴滴 高德 小米 华为 OPPO vivo 特斯拉 比亚迪 理想 蔚来
大疆 戴森 宜家 优衣库 星巴克 瑞幸 喜茶 麦当劳 肯德基 海底捞 Nintendo Sony Canon Nikon
Fujifilm Garmin Fitbit Tesla Toyota Honda BMW Audi Uber Airbnb Booking Netflix Spotify
YouTube Dropbox Evernote Trello Asana Todoist Duolingo Coursera
"""
)

SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗高郑梁谢宋唐许韩冯邓曹彭曾肖田董潘袁蔡蒋余于杜叶程魏苏吕丁任卢姚沈钟姜崔谭陆范汪廖石金韦贾夏付方邹熊白孟秦邱侯江尹薛闫段雷龙黎史陶贺毛郝顾龚邵万覃武钱戴严欧莫孔向常汤康易乔赖文"
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍鹏辉建国红文斌宇浩凯晨欣怡佳琪子涵梓轩雨萱思远嘉懿博宁婷雪琳晓东海波峰亮俊飞鑫鸿昊然睿诗语可馨一诺安蕾"

# Subjects with rough chat weights: mostly stopword pronouns, then many family and work
# roles, so no single role word dominates.
SUBJECTS_ZH: list[tuple[str, float]] = [
    ("我", 30),
    ("我们", 10),
    ("他", 10),
    ("她", 10),
    ("他们", 4),
    ("大家", 2),
    *(
        (role, 1.5)
        for role in _words(
            "用户 我老婆 我老公 我妈 我爸 孩子 室友 同事 老板 朋友 女儿 儿子 哥哥 姐姐 弟弟"
            " 妹妹 爷爷 奶奶 外婆 邻居 房东 客户 导师 同学 表哥 舅舅 男朋友 女朋友 组长 医生"
        )
    ),
]
WEEKDAYS_ZH = ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]
WEEKDAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS_EN = _words("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec")
PROJECT_KEYS = ["OPS", "WEB", "API", "DATA", "INFRA", "PAY", "SRCH", "APP", "ML", "SEC", "CORE"]
RELATIVES_EN = ["wife", "husband", "daughter", "son", "mom", "dad", "sister", "brother", "boss"]


@functools.cache
def en_vocab() -> Vocab:
    """English content words: standard-library prose counts plus everyday chat words."""
    _, en_stop = mtext._stopwords()
    counts: Counter[str] = Counter()
    lib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(lib.rglob("*.py")):
        parts = path.relative_to(lib).parts
        if _SKIP_STDLIB.intersection(parts):
            continue
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for match in _DOC_RE.finditer(source):
            prose = match.group(1) or match.group(2)
            counts.update(w.lower() for w in _EN_WORD_RE.findall(prose))
    weighted = {w: float(n) ** 0.9 for w, n in counts.items() if n >= 2 and w not in en_stop}
    # Everyday words: a flattened Zipf profile with half the mass of the library's prose.
    prose_mass = sum(weighted.values()) or 1.0
    everyday = [w for w in dict.fromkeys(EVERYDAY_EN) if w not in en_stop]
    harmonic = sum(1.0 / (rank + 10) for rank in range(len(everyday)))
    for rank, word in enumerate(everyday):
        weighted[word] = weighted.get(word, 0.0) + 0.5 * prose_mass / harmonic / (rank + 10)
    return Vocab(sorted(weighted.items(), key=lambda item: -item[1]))


# ---------------------------------------------------------------------------
# Slot generators


def _choice(options: Sequence[str], rng: Rng) -> str:
    return options[int(rng.random() * len(options))]


def _lognormal_int(rng: Rng, median: float, sigma: float, low: int, high: int) -> int:
    return max(low, min(high, round(median * math.exp(rng.gauss(0.0, sigma)))))


class Slots:
    """Everything a frame can ask for, as functions of the generator."""

    def __init__(self) -> None:
        zh = zh_vocab()
        self.zh = zh
        self.en = en_vocab()
        self.names_en = zipf(EN_NAMES, 8)
        self.tech = zipf(TECH, 5)
        self.products = zipf(PRODUCTS, 5)
        self.subjects = Vocab(SUBJECTS_ZH)
        self.table: dict[str, Slot] = {
            "n": zh["n"].pick,
            "v": zh["v"].pick,
            "a": zh["a"].pick,
            "t": zh["t"].pick,
            "ns": zh["ns"].pick,
            "nt": zh["nt"].pick,
            "nr": self.name_zh,
            "pron": self.subjects.pick,
            "who": self.who_zh,
            "wd": lambda r: r.choice(WEEKDAYS_ZH),
            "date": self.date_zh,
            "clock": self.clock,
            "num": lambda r: str(_lognormal_int(r, 12, 1.2, 1, 5000)),
            "price": self.price_zh,
            "w": self.en.pick,
            "W": lambda r: self.en.pick(r).capitalize(),
            "name": self.names_en.pick,
            "rel": lambda r: r.choice(RELATIVES_EN),
            "wday": lambda r: r.choice(WEEKDAYS_EN),
            "date_en": self.date_en,
            "usd": lambda r: f"${_lognormal_int(r, 40, 1.3, 1, 99999)}",
            "tech": self.tech.pick,
            "product": self.products.pick,
            "version": self.version,
            "ticket": self.ticket,
            "pr": lambda r: f"#{_lognormal_int(r, 800, 1.0, 1, 99999)}",
            "sha": lambda r: f"{r.getrandbits(28):07x}",
            "ident": self.ident,
            "path": self.path,
            "handle": self.handle,
        }
        for key, options in GLUE.items():
            self.table[key] = functools.partial(_choice, options)

    def name_zh(self, rng: Rng) -> str:
        roll = rng.random()
        surname = SURNAMES[min(int(rng.expovariate(1 / 25)), len(SURNAMES) - 1)]
        if roll < 0.7:
            given = rng.choice(GIVEN) + (rng.choice(GIVEN) if rng.random() < 0.7 else "")
            return surname + given
        if roll < 0.8:
            return rng.choice("小老") + surname
        if roll < 0.83:
            return "阿" + rng.choice(GIVEN)
        return self.zh["nr"].pick(rng)

    def who_zh(self, rng: Rng) -> str:
        return self.subjects.pick(rng) if rng.random() < 0.6 else self.name_zh(rng)

    @staticmethod
    def date_zh(rng: Rng) -> str:
        month, day = rng.randint(1, 12), rng.randint(1, 28)
        roll = rng.random()
        if roll < 0.3:
            return f"{month}月{day}号"
        if roll < 0.7:
            return f"{rng.randint(2019, 2026)}-{month:02d}-{day:02d}"
        if roll < 0.85:
            return f"{month}/{day}"
        return f"{month}月{day}日"

    @staticmethod
    def date_en(rng: Rng) -> str:
        if rng.random() < 0.6:
            return f"{rng.choice(MONTHS_EN)} {rng.randint(1, 28)}"
        return f"{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"

    @staticmethod
    def clock(rng: Rng) -> str:
        return f"{rng.randint(7, 22)}:{rng.choice(('00', '15', '30', '45'))}"

    @staticmethod
    def price_zh(rng: Rng) -> str:
        amount = _lognormal_int(rng, 150, 1.4, 1, 500000)
        return f"{amount}块" if rng.random() < 0.6 else f"¥{amount}"

    @staticmethod
    def version(rng: Rng) -> str:
        major = _lognormal_int(rng, 3, 0.9, 0, 30)
        if rng.random() < 0.5:
            return f"{major}.{rng.randint(0, 20)}"
        return f"{major}.{rng.randint(0, 20)}.{rng.randint(0, 15)}"

    @staticmethod
    def ticket(rng: Rng) -> str:
        return f"{rng.choice(PROJECT_KEYS)}-{_lognormal_int(rng, 300, 1.1, 1, 9999)}"

    def ident(self, rng: Rng) -> str:
        words = [self.en.pick(rng) for _ in range(rng.randint(2, 3))]
        style = rng.random()
        if style < 0.5:
            return "_".join(words)
        if style < 0.85:
            return words[0] + "".join(w.capitalize() for w in words[1:])
        return "".join(w.capitalize() for w in words)

    def path(self, rng: Rng) -> str:
        parts = [self.en.pick(rng) for _ in range(rng.randint(1, 2))]
        ext = rng.choice((".py", ".py", ".ts", ".go", ".rs", ".yaml", ".toml", ".md", ".sql"))
        return "src/" + "/".join(parts) + "/" + self.ident(rng).lower() + ext

    def handle(self, rng: Rng) -> str:
        return f"{self.names_en.pick(rng).lower()}{rng.choice(('_', '.', ''))}{rng.randint(1, 999)}"


# ---------------------------------------------------------------------------
# Frames

# Glue words vary too: a fixed verb in every frame would sit in several % of all chunks.
GLUE: dict[str, tuple[str, ...]] = {
    "like": ("喜欢", "爱", "偏爱", "迷上了", "挺喜欢", "特别爱"),
    "dislike": ("不喜欢", "讨厌", "受不了", "不太喜欢", "不爱"),
    "say": ("说", "提到", "讲", "告诉我", "提过", "强调", "吐槽", "抱怨", "透露", "聊到"),
    "plan": ("打算", "准备", "计划", "想", "决定"),
    "remind": ("提醒", "记得", "别忘了", "记一下", "待办"),
    "think": ("觉得", "认为", "感觉", "担心", "发现"),
    "go": ("去", "回", "飞", "出差去", "搬去", "路过"),
    "buy": ("买了", "订了", "入手了", "下单了", "退了"),
    "recent": ("最近", "这阵子", "上周", "昨天", "今天", "刚才", "前几天"),
    "event": ("生日", "婚礼", "面试", "体检", "考试", "答辩", "年会", "聚会", "复诊", "家长会"),
    "react": ("过敏", "上瘾", "没兴趣", "着迷", "有意见", "不放心", "很满意", "好奇"),
    "use": ("用", "改用", "试了", "换了", "装了", "在学", "入坑"),
    "migrate": ("迁移到", "换成", "切到", "升级成", "替换为"),
    "inside": ("里的", "中的", "下面的", "里面的", "开头的"),
    "fixed": ("修了", "改了", "补上了", "回滚了", "重构了"),
    "track": ("跟进", "排查", "处理", "盯着", "复现"),
    "en_say": ("said", "mentioned", "told me", "thinks", "noted", "asked"),
    "en_need": ("need to", "want to", "should", "have to", "plan to", "promised to"),
    "en_like": ("likes", "loves", "prefers", "hates", "can't stand", "is into"),
    "en_do": ("fix", "review", "update", "check", "move", "write", "test", "clean up"),
}

ZH_FRAMES = [
    "{who}{v}{n}",
    "{who}在{ns}{v}{n}",
    "{t}{who}{v}了{n}",
    "{who}的{n}很{a}",
    "{n}已经{v}了",
    "{who}和{nr}{v}了{n}",
    "{who}{v}的{n}是{n}",
    "{who}{think}{n}太{a}",
    "把{n}{v}给{nr}",
    "{who}要{v}{n}和{n}",
    "{nr}{say}{n}比较{a}",
    "{ns}的{n}{a}",
    "{who}{plan}{v}{n}",
    "{who}{plan}{t}{go}{ns}",
    "{who}对{n}{react}",
    "{who}{like}{n}",
    "{who}{dislike}{n}",
    "{nr}的{event}是{date}",
    "{date}{v}{n}",
    "{wd}{clock}{v}{n}",
    "{who}{buy}{n}，{price}",
    "{nt}{v}了{n}",
    "{n}的{n}{v}了",
    "{who}{recent}{v}{n}",
    "{who}每天{v}{num}分钟{n}",
    "{nr}{like}{n}",
    "{remind}{v}{n}",
    "{who}在{v}{n}的{n}",
    "{n}和{n}都{a}",
    "{who}从{ns}{v}回来了",
    "{nr}和{nr}{v}{n}",
    "{who}还没{v}{n}",
    "{n}{v}至{t}",
    "{who}{recent}{a}地{v}了{n}",
    "{t}的{n}{v}",
    "关于{n}，{nr}{say}要{v}",
    "{who}{use}{product}{v}{n}",
    "{num}个{n}{v}了",
    "{who}被{n}{v}了",
    "{recent}在{ns}{v}{n}",
    "{n}的{n}{think}{a}",
    "{who}{say}{n}",
    "{who}的{n}在{ns}",
    "{nr}{plan}{v}{n}",
    "{who}{recent}{buy}{product}",
    "{n}{a}，{n}{a}",
    "{nt}的{nr}{v}了{n}",
    "{who}{think}{nr}{a}",
    "{who}{go}{ns}{v}{n}",
    "{remind}{who}{date}{v}{n}",
]

EN_FRAMES = [
    "{name} {en_say} the {w} should be {w} before {wday}.",
    "Remember that {name} {en_like} {w} more than {w}.",
    "I {en_need} {en_do} the {w} {w} by {date_en}.",
    "We moved the {w} service from {tech} to {tech} last {wday}.",
    "{ticket}: {w} {w} fails when the {w} is empty.",
    "My {rel} is allergic to {w}.",
    "{name} about the {w} {w} at {clock}.",
    "{name} wants a new {w}, budget around {usd}.",
    "Bug in {ident}(): returns the {w} instead of the {w}.",
    "Upgraded {tech} to {version} and the {w} tests broke.",
    "Table for {num} at {W} {W} on {date_en}.",
    "Reading about {w} and {w}, {name} {en_say} it was {w}.",
    "{name} {en_like} {tech} for {w} work.",
    "Don't use {tech} for new {w} services.",
    "Flight to {W} on {date_en}, bring the {w}.",
    "The {w} config lives in {path}.",
    "{name} ({handle}) owns the {w} {w} now.",
    "Fixed the {w} regression in {sha}, see PR {pr}.",
    "Call {name} back about the {w} before {wday}.",
    "{W} {w} moved to {wday} {clock}.",
    "{name}'s {w} costs {usd}.",
    "Running {tech} {w} takes {num} minutes.",
    "Tried {product} for {w}, not sure it is {w}.",
    "{en_do} the {w} {w} before {date_en}.",
    "{W} {w} is {w} again.",
    "{name} {en_need} {en_do} {ident}.",
    "Notes on {w}: {w} {w}, {w} {w}.",
    "{W} and {w} for {name}.",
    "{name} {en_like} {w} {w}.",
    "{num} {w} {w} left in the {w}.",
    "Ask {name} whether the {w} {w} is {w}.",
    "{W} {w} {w} on {wday}.",
    "Kid's {w} {w} is on {date_en}.",
    "{tech} {version}: {w} {w} works now.",
]

MIXED_FRAMES = [
    "{nr}{say} {tech} 的{n}有点{a}",
    "{use} {tech} 做{n}，{ident} 要改",
    "{who}在{ns}{buy} {product}",
    "PR {pr} {fixed}{n}，{nr} review 过了",
    "{date} {nr} {say} {w} {w}",
    "{t}把 {path} {inside} {w} 改成 {w}",
    "{ticket} 还没关，{nr}在{track}{n}",
    "升级到 {tech} {version} 之后{n}{v}了",
    "{who}的 GitHub 是 {handle}",
    "{n}从 {tech} {migrate} {tech}",
    "{nr} {use} {product} 记{n}",
    "{wd}的 {w} meeting 挪到{clock}",
    "{who}{like} {tech}",
    "{name} 下{wd}来{ns}，要安排{n}",
    "commit {sha} 引入了{n}",
    "{who}{plan}学 {tech}，{v}{n}",
    "{n}的 {w} 是 {w}",
    "{name} {say}{n}很{a}",
    "{product} 的{n}{v}了",
    "{who}的 {w} {w} 在{ns}",
    "{tech} {w} 的{n}{a}",
    "{ident} {inside}{n}要{v}",
    "{remind}给 {name} 发{n}",
    "{who}{recent}在看 {W} {w}",
    "{nr}的 {event} 在 {date_en}",
    "{who}{react} {w}",
    "{handle} {say}{n}{a}",
    "{tech} 的 {ident} {fixed}",
    "{version} 版本{fixed}{n}",
    "{who}{recent}{track} {ticket}",
    "{product} {usd}，{who}{plan}买",
    "{W} {w} 和{n}",
]

_SLOT_RE = re.compile(r"\{(\w+)\}")
Frame = tuple[tuple[str, ...], tuple[Slot, ...]]


def _compile(frame: str, slots: Slots) -> Frame:
    parts = _SLOT_RE.split(frame)
    literals = tuple(parts[0::2])
    fillers = tuple(slots.table[name] for name in parts[1::2])
    return literals, fillers


def _render(frame: Frame, rng: Rng) -> str:
    literals, fillers = frame
    out = [literals[0]]
    for filler, literal in zip(fillers, literals[1:], strict=True):
        out.append(filler(rng))
        out.append(literal)
    return "".join(out)


class Generator:
    def __init__(self) -> None:
        slots = Slots()
        self.slots = slots
        self.zh = [_compile(f, slots) for f in ZH_FRAMES]
        self.en = [_compile(f, slots) for f in EN_FRAMES]
        self.mixed = [_compile(f, slots) for f in MIXED_FRAMES]

    def chunk(self, rng: Rng) -> str:
        """One note: clauses of one language mode until a sampled target length."""
        roll = rng.random()
        frames, joiner, end = (
            (self.zh, "，", "。")
            if roll < 0.5
            else (self.en, " ", "")
            if roll < 0.75
            else (self.mixed, "；", "")
        )
        target = _lognormal_int(rng, 40, 0.45, MIN_CHARS, MAX_CHARS)
        text = _render(rng.choice(frames), rng)
        for _ in range(3):
            if len(text) >= target:
                break
            extra = _render(rng.choice(frames), rng)
            if len(text) + len(joiner) + len(extra) > MAX_CHARS:
                if len(text) >= MIN_CHARS:
                    break
                continue
            text = text + joiner + extra
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS].rstrip()
        if len(text) < MIN_CHARS:
            text += f"（{self.slots.date_zh(rng)}）" if frames is not self.en else " (noted)"
        if end and rng.random() < 0.5 and len(text) < MAX_CHARS:
            text += end
        return text


@functools.cache
def _generator() -> Generator:
    return Generator()


def sentences(count: int, seed: int = SEED) -> list[str]:
    """`count` chat-memory-like chunks of 20-120 characters (about 50 % Chinese, 25 %
    English, 25 % mixed), identical for the same seed."""
    gen = _generator()
    rng = random.Random(seed)
    return [gen.chunk(rng) for _ in range(count)]


# ---------------------------------------------------------------------------
# Queries

_LATIN_RE = re.compile(r"[A-Za-z][A-Za-z0-9+#.]*[A-Za-z0-9+#]|[A-Za-z]|\d[\d.-]*\d|\d")
_HAN_RUN_RE = re.compile(r"[\u4e00-\u9fff]+")

ZH_QUESTIONS = [
    "{}",
    "{}是什么时候的事",
    "我之前说过{}吗",
    "{}怎么样了",
    "还记得{}吗",
    "关于{}的记录",
    "{}是谁说的",
    "上次提到的{}",
]
EN_QUESTIONS = [
    "{}",
    "what did I say about {}?",
    "when is the {}?",
    "who mentioned {}",
    "anything about {}",
    "remind me about {}",
    "{} again?",
]


def _keywords(sentence: str) -> list[str]:
    """Content words of a sentence as a user might type them (original case)."""
    zh_stop, en_stop = mtext._stopwords()
    segmenter = mtext._segmenter()
    words: list[str] = []
    for match in re.finditer(f"{_HAN_RUN_RE.pattern}|{_LATIN_RE.pattern}", sentence):
        token = match.group()
        if _HAN_RUN_RE.fullmatch(token):
            words.extend(w for w in segmenter.cut(token, False) if len(w) >= 2 and w not in zh_stop)
        elif token.lower() not in en_stop and (len(token) >= 3 or token.isdigit()):
            words.append(token)
    return list(dict.fromkeys(words))


def query_targets(sentences: Sequence[str], count: int, seed: int = SEED) -> list[tuple[int, str]]:
    """(index of the target sentence, query) pairs: a few of its keywords or a short
    question about them, sometimes a subset paraphrased with an unrelated word, sometimes
    in the other language's phrasing."""
    gen = _generator()
    rng = random.Random(seed)
    out: list[tuple[int, str]] = []
    while len(out) < count:
        target = rng.randrange(len(sentences))
        words = _keywords(sentences[target])
        if not words:
            continue
        take = min(len(words), rng.choice((1, 2, 2, 2, 3, 3)))
        chosen = rng.sample(words, take)
        style = rng.random()
        if style < 0.2 and len(words) > 1:
            # Paraphrase: keep part of it, add a word the user associates with it.
            chosen = chosen[: max(1, take - 1)]
            extra = gen.slots.zh["n"].pick(rng) if rng.random() < 0.5 else gen.slots.en.pick(rng)
            chosen.insert(rng.randrange(len(chosen) + 1), extra)
        joined = " ".join(chosen)
        han = bool(_HAN_RUN_RE.search(joined))
        if style < 0.55:
            query = joined
        else:
            # Mostly the keywords' own language; now and then the other one (mixed).
            zh_frame = han if rng.random() < 0.8 else not han
            frame = rng.choice(ZH_QUESTIONS if zh_frame else EN_QUESTIONS)
            query = frame.format("".join(chosen) if zh_frame and han and take == 1 else joined)
        if rng.random() < 0.3:
            query = query.lower()
        out.append((target, query))
    return out


def queries(sentences: Sequence[str], count: int, seed: int = SEED) -> list[str]:
    """What users would type to find something in `sentences` (see `query_targets`)."""
    return [query for _, query in query_targets(sentences, count, seed)]


# ---------------------------------------------------------------------------
# Long-term memory entries


def memory_entries(count: int, seed: int = SEED, now: datetime | None = None) -> list[MemoryEntry]:
    """`count` MemoryEntry objects with spread ages, scores, hits and categories, as a
    long-lived MEMORY.md would hold (some pinned, some archived, some expiring todos)."""
    now = (now or datetime(2026, 6, 1, 12, 0, tzinfo=UTC)).astimezone(UTC)
    now = now.replace(microsecond=0)
    rng = random.Random(seed)
    texts = sentences(count, seed + 1)
    category_weights = [30, 30, 12, 8, 8, 4, 8]
    ids: set[str] = set()
    entries: list[MemoryEntry] = []
    for content in texts:
        entry_id = f"{rng.getrandbits(32):08x}"
        while entry_id in ids:
            entry_id = f"{rng.getrandbits(32):08x}"
        ids.add(entry_id)
        category = rng.choices(CATEGORIES, weights=category_weights)[0]
        age_days = min(rng.expovariate(1 / 90), 1000)
        created = now - timedelta(days=age_days, seconds=rng.randrange(86400))
        last = created + (now - created) * rng.random() ** 2
        scored = last + (now - last) * rng.random()
        hits = min(int(rng.expovariate(1 / 3)), 200)
        score = round(min(1.0, max(0.05, rng.betavariate(2.5, 2.0))), 4)
        pinned = rng.random() < 0.02
        archived = None
        roll = rng.random()
        if roll < 0.03:
            archived = ArchiveReason.MANUAL
        expires = None
        if category == "todo" and rng.random() < 0.5:
            expires = now + timedelta(days=rng.uniform(-30, 60))
            if expires <= now and rng.random() < 0.5:
                archived = ArchiveReason.EXPIRED
        sessions = tuple(f"s{rng.getrandbits(24):06x}" for _ in range(min(hits, rng.randint(0, 3))))
        entries.append(
            MemoryEntry(
                id=entry_id,
                content=content,
                category=category,
                score=score,
                created_at=created.replace(microsecond=0),
                last_activated=last.replace(microsecond=0),
                scored_at=scored.replace(microsecond=0),
                hits=hits,
                source_session=sessions[0] if sessions else None,
                confidence=round(rng.uniform(0.5, 1.0), 2) if rng.random() < 0.3 else None,
                expires_at=expires.replace(microsecond=0) if expires else None,
                pinned=pinned,
                archived=archived,
                sessions=sessions,
            )
        )
    return entries


# ---------------------------------------------------------------------------
# Statistics (run as a script)


def machine_load() -> str:
    """Load averages: the machine is shared, so every report says how busy it was."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unavailable"
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} cpus"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(_pad(c, w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _width(cell: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if mtext._HAS_CJK_RE.match(ch) or "\uff00" <= ch <= "\uffef" else 1 for ch in cell)


def _pad(cell: str, width: int) -> str:
    return cell + " " * (width - _width(cell))


def vocabulary_report(name: str, chunks: Sequence[str], query_list: Sequence[str]) -> list[str]:
    """Rows of the stats table for one corpus, plus its top-20 document frequencies."""
    start = time.perf_counter()
    token_lists = [mtext.tokenize(c) for c in chunks]
    seconds = time.perf_counter() - start
    df: Counter[str] = Counter()
    for tokens in token_lists:
        df.update(set(tokens))
    n = len(chunks)
    lengths = [len(c) for c in chunks]
    query_dfs = [df.get(t, 0) for q in query_list for t in set(mtext.tokenize(q))]
    han = sum(1 for c in chunks if mtext.has_cjk(c))
    once = sum(1 for v in df.values() if v == 1)
    print(f"== {name}: {n:,} chunks")
    print(f"   e.g. {chunks[0]}")
    print(f"        {chunks[1]}")
    print(f"        {chunks[2]}")
    print(f"   queries e.g. {' | '.join(query_list[:6])}")
    rows = [
        ("chunks", f"{n:,}"),
        ("chunk chars p5 / p50 / p95 / max", _quad(lengths)),
        ("chunks with CJK", f"{han / n:.0%}"),
        ("tokens per chunk (mean)", f"{statistics.fmean(len(t) for t in token_lists):.1f}"),
        ("distinct tokens", f"{len(df):,}"),
        ("tokens in exactly one chunk", f"{once:,} ({once / max(len(df), 1):.0%})"),
        (
            "tokenize throughput",
            f"{n / seconds:,.0f} chunks/s, {sum(lengths) / seconds:,.0f} chars/s",
        ),
        ("query terms", f"{len(query_dfs):,} over {len(query_list)} queries"),
        (
            "query-term DF median (chunks / %)",
            f"{statistics.median(query_dfs):,.0f} / {statistics.median(query_dfs) / n:.3%}",
        ),
        (
            "query-term DF p90 (chunks / %)",
            f"{percentile(query_dfs, 90):,.0f} / {percentile(query_dfs, 90) / n:.2%}",
        ),
        ("query terms absent from corpus", f"{sum(1 for d in query_dfs if d == 0)}"),
    ]
    print(table(["statistic", "value"], rows))
    top = df.most_common(20)
    print(f"   top-20 document frequencies (% of {n:,} chunks):")
    print(
        "   "
        + ", ".join(f"{term} {count / n:.2%}" for term, count in top[:10])
        + "\n   "
        + ", ".join(f"{term} {count / n:.2%}" for term, count in top[10:])
    )
    print()
    return [
        name,
        f"{len(df):,}",
        f"{top[0][1] / n:.2%}",
        f"{top[19][1] / n:.2%}",
        f"{statistics.median(query_dfs) / n:.3%}",
    ]


def _quad(values: Sequence[int]) -> str:
    return " / ".join(f"{percentile(values, q):.0f}" for q in (5, 50, 95, 100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 000 chunks instead of 100 000")
    args = parser.parse_args()
    count = 10_000 if args.quick else 100_000
    mtext.warm_up()
    start = time.perf_counter()
    zh, en = zh_vocab(), en_vocab()
    load = time.perf_counter() - start
    sizes = ", ".join(f"{k} {len(v):,}" for k, v in zh.items())
    print(f"vocabularies loaded in {load:.2f} s: zh ({sizes}), en {len(en):,} words")
    start = time.perf_counter()
    chunks = sentences(count)
    generation = time.perf_counter() - start
    print(f"generated {count:,} chunks in {generation:.2f} s ({count / generation:,.0f}/s)")
    print()
    summary = [vocabulary_report("bench/corpus.py", chunks, queries(chunks, 1000))]

    from testkit.chat_sample import generate_sentences

    stress = generate_sentences(count)
    summary.append(
        vocabulary_report(
            "chat_sample.generate_sentences (tiny vocabulary)", stress, queries(stress, 1000)
        )
    )
    headers = ["corpus", "distinct tokens", "top-1 DF", "20th DF", "median query-term DF"]
    print(f"summary ({count:,} chunks each; DF = share of chunks containing the term)")
    print(table(headers, summary))


if __name__ == "__main__":
    main()
