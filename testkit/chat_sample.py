"""Seeded chat-like sample text: about half Chinese, a quarter English, a quarter mixed.

What the tokenizer bench measures on, and what tests that need a few thousand realistic
chunks index (the FTS5 ranking against rank-bm25): one generator, so both see the same
text for one seed."""

from __future__ import annotations

import random
from collections.abc import Iterable

SEED = 20260509
CHUNK_CHARS = 60

WHO = ["我", "用户", "他", "她", "我老婆", "我同事小王", "我们老板", "我妈", "孩子", "室友"]
FOOD = ["火锅", "寿司", "麻辣烫", "小笼包", "披萨", "牛肉面", "烤鸭", "沙拉", "拉面", "煎饼果子"]
DRINK = ["咖啡", "奶茶", "绿茶", "可乐", "啤酒", "豆浆"]
HOBBY = ["跑步", "摄影", "钓鱼", "打羽毛球", "弹吉他", "看科幻小说", "爬山", "下围棋", "做饭"]
CITY = ["北京", "上海", "杭州", "成都", "深圳", "西安", "东京", "大阪", "新加坡", "巴黎"]
ACTIVITY = ["出差", "旅游", "看展览", "见客户", "过春节", "参加婚礼", "度假"]
TIME = ["下周", "下个月", "国庆节", "五一", "明年春天", "周末", "月底"]
DAY = ["周一", "周二", "周三", "周四", "周五"]
TEAM = ["产品组", "后端团队", "运维", "设计师", "客户", "财务部"]
TOPIC = ["季度目标", "上线计划", "预算", "招聘", "性能优化", "用户反馈", "数据迁移"]
PROJECT = ["订单系统", "推荐服务", "支付网关", "搜索服务", "数据平台", "客服机器人"]
COMPONENT = ["数据库连接池", "缓存", "消息队列", "向量检索服务", "登录接口", "定时任务"]
PROBLEM = ["内存泄漏", "超时", "死锁", "延迟飙升", "数据不一致", "频繁重启"]
TECH = [
    "FastAPI",
    "Flask",
    "Django",
    "PostgreSQL",
    "MySQL",
    "Redis",
    "Kafka",
    "pytest",
    "unittest",
    "SQLite",
    "Kubernetes",
    "Docker",
    "React",
    "Vue",
    "Rust",
    "Go",
]
VERSION = ["3.11", "3.12", "2.0", "1.4.2", "18", "22.04"]
CODE = ["502", "500", "404", "429", "503"]
EN_FOOD = ["peanuts", "shellfish", "gluten", "milk", "eggs"]
EN_RELATIVE = ["daughter", "son", "wife", "husband", "mother", "roommate"]
EN_TASK = ["web APIs", "data pipelines", "unit testing", "background jobs", "dashboards"]
EN_CLOUD = ["AWS", "GCP", "Azure", "a bare-metal rack", "Hetzner"]
EN_PLACE = ["Tokyo", "Lisbon", "Chengdu", "Berlin", "Vancouver", "Seoul"]

ZH_TEMPLATES = [
    "{who}喜欢吃{food}，不太喜欢{food2}。",
    "{who}每天早上都要喝一杯{drink}。",
    "{who}最近迷上了{hobby}，周末经常去。",
    "{who}打算{time}去{city}{activity}。",
    "下{day}要和{team}开会讨论{topic}。",
    "{project}的{component}上线以后出现了{problem}，还在排查。",
    "{city}那家店的{food}特别好吃，下次还想去。",
    "{who}对{food}过敏，点菜的时候要注意。",
    "这个问题是因为{component}配置不对导致的。",
    "{who}说{time}想换一份工作，压力太大了。",
]
EN_TEMPLATES = [
    "I prefer {tech} over {tech2} for {task}.",
    "We moved the {component_en} to {cloud} last {weekday}.",
    "My {relative} is allergic to {en_food}, please remember that.",
    "Running the {tech} tests takes {n} minutes on CI, which is annoying.",
    "She's flying to {place} next month for a conference.",
    "Don't use {tech2} for new services; it's being deprecated.",
]
MIXED_TEMPLATES = [
    "我们决定用 {tech} 替代 {tech2}",
    "用户喜欢用{tech}而非{tech2}",
    "{project}接口返回{code}错误，排查发现是{tech}的连接数满了",
    "升级到 Python {version} 之后 {tech} 的测试全挂了",
    "{who}在用 VS Code，主题是 dark mode，字体是 JetBrains Mono",
    "{component}从 {tech2} 迁移到 {tech}，预计{time}完成",
    "记住：{who}的 GitHub 用户名是 {handle}",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
COMPONENT_EN = ["job queue", "search index", "billing service", "auth proxy", "cache layer"]


def _fill(template: str, rng: random.Random) -> str:
    tech, tech2 = rng.sample(TECH, 2)
    food, food2 = rng.sample(FOOD, 2)
    return template.format(
        who=rng.choice(WHO),
        food=food,
        food2=food2,
        drink=rng.choice(DRINK),
        hobby=rng.choice(HOBBY),
        city=rng.choice(CITY),
        activity=rng.choice(ACTIVITY),
        time=rng.choice(TIME),
        day=rng.choice(DAY),
        team=rng.choice(TEAM),
        topic=rng.choice(TOPIC),
        project=rng.choice(PROJECT),
        component=rng.choice(COMPONENT),
        problem=rng.choice(PROBLEM),
        tech=tech,
        tech2=tech2,
        version=rng.choice(VERSION),
        code=rng.choice(CODE),
        task=rng.choice(EN_TASK),
        component_en=rng.choice(COMPONENT_EN),
        cloud=rng.choice(EN_CLOUD),
        weekday=rng.choice(WEEKDAYS),
        relative=rng.choice(EN_RELATIVE),
        en_food=rng.choice(EN_FOOD),
        n=rng.randint(2, 45),
        place=rng.choice(EN_PLACE),
        handle=f"dev_{rng.randint(100, 999)}",
    )


def generate_sentences(count: int, seed: int = SEED) -> list[str]:
    """Chat-like sentences: about half Chinese, a quarter English, a quarter mixed."""
    rng = random.Random(seed)
    pools = [ZH_TEMPLATES] * 2 + [EN_TEMPLATES, MIXED_TEMPLATES]
    return [_fill(rng.choice(rng.choice(pools)), rng) for _ in range(count)]


def make_chunks(sentences: Iterable[str], size: int = CHUNK_CHARS) -> list[str]:
    """Join sentences into chunks of roughly `size` characters, like stored memories."""
    chunks: list[str] = []
    current = ""
    for sentence in sentences:
        if current and len(current) + 1 + len(sentence) > size:
            chunks.append(current)
            current = ""
        current = f"{current} {sentence}".strip()
    if current:
        chunks.append(current)
    return chunks
