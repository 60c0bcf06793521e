"""The words bench/corpus.py fills its frames with: Chinese vocabularies from jieba's
dictionary sampled by frequency, English ones counted in the standard library's prose plus
everyday chat words, and `Slots`, the generators of names, numbers, dates, products and
identifiers a frame's slots draw from."""

from __future__ import annotations

import bisect
import functools
import importlib.util
import itertools
import math
import random
import re
import sysconfig
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from memory_core.base import text as mtext

Rng = random.Random
Slot = Callable[[Rng], str]

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


def lognormal_int(rng: Rng, median: float, sigma: float, low: int, high: int) -> int:
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
            "num": lambda r: str(lognormal_int(r, 12, 1.2, 1, 5000)),
            "price": self.price_zh,
            "w": self.en.pick,
            "W": lambda r: self.en.pick(r).capitalize(),
            "name": self.names_en.pick,
            "rel": lambda r: r.choice(RELATIVES_EN),
            "wday": lambda r: r.choice(WEEKDAYS_EN),
            "date_en": self.date_en,
            "usd": lambda r: f"${lognormal_int(r, 40, 1.3, 1, 99999)}",
            "tech": self.tech.pick,
            "product": self.products.pick,
            "version": self.version,
            "ticket": self.ticket,
            "pr": lambda r: f"#{lognormal_int(r, 800, 1.0, 1, 99999)}",
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
        amount = lognormal_int(rng, 150, 1.4, 1, 500000)
        return f"{amount}块" if rng.random() < 0.6 else f"¥{amount}"

    @staticmethod
    def version(rng: Rng) -> str:
        major = lognormal_int(rng, 3, 0.9, 0, 30)
        if rng.random() < 0.5:
            return f"{major}.{rng.randint(0, 20)}"
        return f"{major}.{rng.randint(0, 20)}.{rng.randint(0, 15)}"

    @staticmethod
    def ticket(rng: Rng) -> str:
        return f"{rng.choice(PROJECT_KEYS)}-{lognormal_int(rng, 300, 1.1, 1, 9999)}"

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
