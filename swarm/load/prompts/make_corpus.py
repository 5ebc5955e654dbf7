"""Generate the shipped RAG corpus: `rag_corpus.jsonl` and `rag_preamble.json`.

Deterministic (fixed seed): rerunning it rewrites the same files. The documents are synthetic
product manuals of a made-up cloud provider, in Chinese and English, one document per
(product, aspect, language); each carries a question whose answer is a fact in its first
sentences, so a truncated document still answers its question. The preamble is a fixed system
text (instructions + pinned reference notes) long enough for a 90% common prefix of a 3k prompt.

Run: python swarm/load/prompts/make_corpus.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261122

PRODUCTS = [
    ("对象存储", "Object Storage", "存储桶", "buckets"),
    ("云数据库", "Cloud Database", "数据库实例", "database instances"),
    ("GPU 计算实例", "GPU Instances", "GPU 实例", "GPU instances"),
    ("内容分发网络", "CDN", "加速域名", "accelerated domains"),
    ("消息队列", "Message Queue", "主题", "topics"),
    ("容器服务", "Container Service", "集群", "clusters"),
    ("负载均衡", "Load Balancer", "监听器", "listeners"),
    ("日志服务", "Log Service", "日志库", "log stores"),
    ("函数计算", "Functions", "函数", "functions"),
    ("向量检索", "Vector Search", "索引", "indexes"),
    ("大模型推理服务", "LLM Inference", "推理端点", "inference endpoints"),
    ("备份服务", "Backup", "备份计划", "backup plans"),
]
ASPECTS = [
    ("计费说明", "Billing"),
    ("配额与限制", "Quotas and Limits"),
    ("故障排查", "Troubleshooting"),
    ("地域与可用区", "Regions and Zones"),
    ("服务等级协议", "Service Level Agreement"),
    ("安全与权限", "Security and Access"),
    ("监控与告警", "Monitoring and Alerts"),
    ("迁移指南", "Migration Guide"),
]
REGIONS = [
    ("华东一区(杭州)", "East China 1 (Hangzhou)"),
    ("华北二区(北京)", "North China 2 (Beijing)"),
    ("华南一区(深圳)", "South China 1 (Shenzhen)"),
    ("西南一区(成都)", "Southwest 1 (Chengdu)"),
    ("新加坡", "Singapore"),
    ("法兰克福", "Frankfurt"),
]
ZH = [
    "{p}在{r}的单价为每小时 {price} 元,按实际使用时长计费,不足一小时按一小时计算。",
    "控制台的{a}页面每 {n} 分钟刷新一次数据,历史记录保留 {days} 天。",
    "如果请求返回错误码 {code},通常表示调用频率超过了每秒 {qps} 次的限制,请稍后重试。",
    "{r}目前提供 {zones} 个可用区,跨可用区的网络延迟一般低于 {ms} 毫秒。",
    "月度可用性低于 {sla}% 时,用户可以申请相当于当月费用 {pct}% 的服务补偿。",
    "建议为每个{res}单独配置访问策略,并定期轮换访问密钥,周期不超过 {days} 天。",
    "当 CPU 使用率连续 {n} 分钟超过 {pct}% 时,系统会向告警联系人发送短信和邮件通知。",
    "迁移前请先在测试环境演练,单次迁移的数据量建议不超过 {gb} GB。",
    "{p}支持通过 API、命令行工具和控制台三种方式管理,其中 API 的版本号为 v{v}。",
    "对于包年包月的资源,到期前 {days} 天系统会自动发送续费提醒。",
    "日志中出现 “{err}” 时,请检查网络安全组是否放通了 {port} 端口。",
    "每个账号默认可以创建的{res}数量为 {quota} 个,如需更多请提交工单申请提升配额。",
    "在业务高峰期,建议预留至少 {pct}% 的容量余量,以应对突发流量。",
    "数据在写入后会同步复制到 {copies} 个副本,确保单个节点故障时数据不丢失。",
    "如果连接超时,请先确认客户端与{r}之间的网络是否可达,再检查实例是否处于运行状态。",
    "升级操作会在维护窗口内进行,期间服务可能出现不超过 {sec} 秒的短暂中断。",
    "通过标签可以按项目或部门汇总费用,账单明细每天 {hour} 点更新一次。",
    "开启删除保护后,{res}不能被直接删除,需要先在控制台关闭该保护。",
    "单个请求的最大负载为 {mb} MB,超过限制的请求会被拒绝并返回错误码 {code}。",
    "我们建议使用最新版本的 SDK(v{v} 及以上),旧版本将在 {days} 天后停止维护。",
]
EN = [
    "In {r}, {p} costs {price} per hour, billed by actual usage and rounded up to the next full hour.",
    "The {a} page in the console refreshes every {n} minutes and keeps history for {days} days.",
    "Error code {code} usually means the call rate exceeded the limit of {qps} requests per second; retry later.",
    "{r} currently offers {zones} availability zones, with cross-zone latency usually below {ms} milliseconds.",
    "If monthly availability falls below {sla}%, customers may claim a credit of {pct}% of that month's fees.",
    "Configure a separate access policy for each of your {res} and rotate access keys at least every {days} days.",
    "When CPU usage stays above {pct}% for {n} minutes, the alert contacts receive a text message and an email.",
    "Rehearse the migration in a test environment first; keep each migration batch below {gb} GB.",
    "{p} can be managed through the API, the command-line tool and the console; the current API version is v{v}.",
    "For subscription resources, a renewal reminder is sent {days} days before expiry.",
    'If the log shows "{err}", check that the security group allows traffic on port {port}.',
    "Each account may create up to {quota} {res} by default; open a ticket to request a higher quota.",
    "During peak hours, keep at least {pct}% spare capacity to absorb traffic bursts.",
    "Written data is replicated to {copies} copies, so a single node failure loses no data.",
    "If a connection times out, first confirm that the client can reach {r}, then check that the instance is running.",
    "Upgrades happen inside the maintenance window and may interrupt the service for up to {sec} seconds.",
    "Tags let you group costs by project or department; the detailed bill is updated daily at {hour}:00.",
    "With deletion protection on, {res} cannot be deleted directly until the protection is turned off in the console.",
    "The maximum payload of a single request is {mb} MB; larger requests are rejected with error code {code}.",
    "Use SDK v{v} or later; older versions stop receiving maintenance in {days} days.",
]
ERRORS = ["connection reset by peer", "TLS handshake timeout", "no route to host", "503 Service Unavailable"]


def _slots(
    rng: random.Random, product: tuple[str, ...], aspect: tuple[str, str], region: tuple[str, str], zh: bool
) -> dict[str, object]:
    return {
        "p": product[0] if zh else product[1],
        "res": product[2] if zh else product[3],
        "a": aspect[0] if zh else aspect[1],
        "r": region[0] if zh else region[1],
        "price": f"{rng.uniform(0.05, 40):.2f}",
        "n": rng.choice([1, 5, 10, 15]),
        "days": rng.choice([7, 14, 30, 60, 90, 180]),
        "code": rng.choice([400, 403, 413, 429, 503]),
        "qps": rng.choice([20, 50, 100, 500, 1000]),
        "zones": rng.randint(2, 5),
        "ms": rng.choice([1, 2, 3, 5]),
        "sla": rng.choice(["99.9", "99.95", "99.99"]),
        "pct": rng.choice([10, 20, 25, 30, 50, 80, 90]),
        "gb": rng.choice([50, 100, 500, 1024]),
        "v": f"{rng.randint(1, 4)}.{rng.randint(0, 9)}",
        "err": rng.choice(ERRORS),
        "port": rng.choice([22, 443, 3306, 5432, 6379, 8080]),
        "quota": rng.choice([10, 20, 50, 100, 200]),
        "copies": rng.choice([2, 3]),
        "sec": rng.choice([5, 10, 30, 60]),
        "hour": rng.choice([2, 6, 8]),
        "mb": rng.choice([4, 10, 32, 100]),
    }


def _document(rng: random.Random, product: tuple[str, ...], aspect: tuple[str, str], zh: bool) -> dict:
    region = rng.choice(REGIONS)
    s = _slots(rng, product, aspect, region, zh)
    quota = s["quota"]
    if zh:
        title = f"{product[0]}{aspect[0]}"
        fact = f"{s['p']}在{s['r']}的每个账号最多可以创建 {quota} 个{s['res']}。"
        question = f"{s['p']}在{s['r']}的每个账号最多可以创建多少个{s['res']}?"
        templates = ZH
    else:
        title = f"{product[1]}: {aspect[1]}"
        fact = f"In {s['r']}, each account of {s['p']} may create at most {quota} {s['res']}."
        question = f"How many {s['res']} can one account of {s['p']} create in {s['r']}?"
        templates = EN
    sentences = [fact]
    for _ in range(rng.randint(22, 40)):
        sentences.append(
            rng.choice(templates).format(**_slots(rng, product, aspect, rng.choice(REGIONS), zh))
        )
    return {
        "lang": "zh" if zh else "en",
        "topic": product[1],
        "title": title,
        "question": question,
        "sentences": sentences,
    }


PREAMBLE_INSTRUCTIONS = (
    "你是星河云(Xinghe Cloud)的技术支持助手。请只根据“参考资料”回答用户的问题;资料中没有的信息,"
    "请明确说明“资料中没有相关信息”,不要编造。回答时先给出结论,再用不超过三点说明依据,并注明引用的资料编号。"
    "用户用什么语言提问,就用什么语言回答。涉及费用、配额和限制时,必须给出资料中的原始数字和单位。"
    "You are the technical support assistant of Xinghe Cloud. Answer only from the reference material; "
    "if the material does not contain the answer, say so. Lead with the answer, then give at most three "
    "supporting points and cite the document numbers."
)


def main() -> None:
    rng = random.Random(SEED)
    docs = []
    for product in PRODUCTS:
        for aspect in ASPECTS:
            for zh in (True, False):
                docs.append(_document(rng, product, aspect, zh))
    for i, d in enumerate(docs):
        d["id"] = f"doc-{i:03d}"
    with open(HERE / "rag_corpus.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(
                json.dumps(
                    {k: d[k] for k in ("id", "lang", "topic", "title", "question", "sentences")},
                    ensure_ascii=False,
                )
                + "\n"
            )
    pinned = []  # pinned reference notes: the long, fixed tail of the system preamble
    prng = random.Random(SEED + 1)
    while len(pinned) < 260:
        zh = len(pinned) % 3 != 2
        product, aspect = prng.choice(PRODUCTS), prng.choice(ASPECTS)
        pinned.append(
            prng.choice(ZH if zh else EN).format(**_slots(prng, product, aspect, prng.choice(REGIONS), zh))
        )
    with open(HERE / "rag_preamble.json", "w", encoding="utf-8") as f:
        json.dump({"instructions": PREAMBLE_INSTRUCTIONS, "pinned": pinned}, f, ensure_ascii=False, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
