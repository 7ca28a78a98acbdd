"""Tokens of a text as the answer window's reader counts them, estimated on the standard library.

The leaderboard's reader (gpt-4o-mini) reads the first 117,760 tokens of a Search's results in
its own tokenizer, o200k_base. The window is filled by this estimate, which is meant never to be
below the reader's count on English, Chinese or code: a reader that counted more than we did
would cut the last item, and could lose the evidence in it. tests/test_tokens.py holds it above
o200k_base itself (a test-only package ships the vocabulary) on English chat, Chinese, code and
random text.
"""

from __future__ import annotations

import functools
import math
import re

from aml_retriever.analysis.stopwords import STOP_WORDS

# Pieces much as o200k_base's pre-tokenizer cuts text (its regex needs \p{..}, which `re` lacks):
# letters split at case changes, with one mark before them that o200k_base usually merges into
# the word (_ . - ( ) < + ' , & * [ /) and a contraction after; digit runs; runs of ASCII marks
# (with up to two newlines); whitespace runs; one Han character; any other character.
_PIECE = re.compile(
    r"(?P<word>[_.\-()<+',&*\[/]?(?:[A-Z]*[a-z]+|[A-Z]+)(?:'(?:[sStTmMdD]|re|ve|ll)(?![A-Za-z]))?)"
    r"|(?P<digits>[0-9]+)"
    r"|(?P<punct>[!-/:-@\[-`{-~]+\n{0,2})"
    r"|(?P<space>\s+)"
    r"|(?P<han>[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f])"
    r"|(?P<other>.)", re.S)
# Whitespace that costs a token: every run but a single space, matched whole: a run that starts
# with other whitespace than a space, or a space and more (this spelling scans 1.6x faster than
# `\s{2,}|[^\S ]`, which finds the same runs).
_SPACE_TOKEN = re.compile(r"[^\S ]\s*| \s+")
# CJK punctuation that o200k_base encodes as one token each.
_CJK_PUNCT_ONE = frozenset("，。、！？：；“”‘’（）《》【】…—～·「」『』")
# A run of the base64 alphabet (a key, an encoded file): o200k_base gives random base64 0.66-0.68
# tokens a character (100 B to 20 kB encoded), where its pieces here, read as words and digit
# runs, cost 0.55-0.57: an answer of such runs was 0.91-0.95 of its count, margin included. A
# run this long of those characters, with both cases and a digit, costs at least this a character.
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
BASE64_RUN = 16
BASE64_PER_CHAR = 0.7
# The margin `bound` adds to a total of pieces.
MARGIN = 1.12
# How much of a text `_unlike_english` reads (its first runs), and what it strips from a run.
_SAMPLE = 64
_EDGE = ".,!?;:\"'()[]*-"


def estimate_tokens(text: str) -> int:
    """Tokens of `text` in o200k_base (gpt-4o), estimated so as never to be fewer than the true
    count: `bound(pieces(text))`."""
    return bound(pieces(text))


def bound(total: int) -> int:
    """Never fewer tokens than the reader counts in a text whose pieces cost `total`: 12% and a
    square root more (the pieces' errors average out over a long text, a short one's do not),
    plus 2. Applied once to a whole answer (engine/window.py) rather than to each message in it:
    per message, the margin took a quarter of the window on BEAM (its messages counted 1.32x
    gpt-4o's own count; their pieces 1.045x)."""
    return math.ceil(total * MARGIN + math.sqrt(total) + 2)


def pieces_within(tokens: int) -> int:
    """The largest total of pieces whose `bound` is at most `tokens` (0 when none is)."""
    total = max(0, int((tokens - 2 - math.sqrt(max(tokens, 0))) / MARGIN))
    while total > 0 and bound(total) > tokens:
        total -= 1
    while bound(total + 1) <= tokens:
        total += 1
    return total if bound(total) <= tokens else 0


def pieces(text: str) -> int:
    """What `text` costs piece by piece, before the margin (`bound`): each piece what o200k_base
    gives most pieces of its kind and length (fitted above the per-length means on the
    development sets and on chat in twelve languages, tests/test_tokens.py), a Han character one
    token when o200k_base has it as one token and its UTF-8 bytes otherwise. Stored with every
    message at Add; the sum of a whole answer's is what `bound` takes.

    Each run between whitespace is costed once per distinct run (`_run_tokens`, cached): most
    runs are words a user writes again and again. Whitespace is not costed run by run: a single
    space joins the next word or mark (free, but a number after it costs one, charged with the
    run), any other run is a token of its own, more when long, found by a pattern only in text
    that holds one. Made at every Add: piece by piece 423 us a message (LoCoMo and BEAM dev); by
    cached runs in a Python loop 80 us, 193 us on long messages (bench_long's, 2,160
    characters); as now, 86 us on those. A run costs at least what its pieces cost in the text:
    a mark's newlines, which the whole text would merge into it, cost apart here (an
    overcount, never an under)."""
    runs = text.split()
    total = sum(map(_run_tokens, runs))
    if _unlike_english(runs):
        total += sum(map(_run_extra, runs))
    elif runs:  # a word that opens a line has no space before it: o200k_base splits it more
        total += _start_extra(runs[0])
        if "\n" in text:
            total += sum(_start_extra(line.split(None, 1)[0]) for line in text.split("\n")[1:]
                         if line and not line.isspace())
    if runs and runs[0][0].isdigit() and not text[0].isspace():
        total -= 1  # no whitespace before the first run: it was charged for one
    # Printable text without a double space has no whitespace but single spaces (every other
    # whitespace character is a control or a separator): most chat, checked at C speed.
    if not text.isprintable() or "  " in text:
        for run in _SPACE_TOKEN.findall(text):
            total += 1 + math.ceil(max(0, len(run) - 2) / 4)
    return math.ceil(total)


def _unlike_english(runs: list[str]) -> bool:
    """Whether a text's words are costed as those of a language o200k_base splits more finely
    than English (Swahili, romanised Japanese: 2.6 letters a token where English words are most
    often one): fewer than three words, fewer than one in five of them English stop words, or
    three in five ending in a vowel. English chat (LoCoMo and BEAM dev, 2,992 messages of three
    words or more) is under the first in 17 and half end in a consonant; Swahili's and romaji's
    chat is over both in every paragraph (tests/data/languages). Only lowercase words decide,
    not those opening with a bracket: capitalised names and labels are no language's prose, and
    the reader's view's header ("[Mon 8 May 2023, 13:56 UTC] Caroline (user): ...") made a short
    English message count as unlike English, costing its item more than the fill had counted."""
    words = [w for w in (run.strip(_EDGE) for run in runs[:_SAMPLE] if run[0] not in "([")
             if w.isalpha() and w.isascii() and w[0].islower()]
    if len(words) < 3:
        return True
    stop = sum(w in STOP_WORDS for w in words)
    vowel = sum(w[-1] in "aeiou" for w in words)
    return stop * 5 < len(words) or vowel * 5 >= len(words) * 3


@functools.lru_cache(maxsize=65_536)
def _run_extra(run: str, first_only: bool = False) -> float:
    """What a run's letter pieces cost more in a text unlike English (`_unlike_english`), or its
    first piece at the start of a line (`first_only`): each at least a token for 2.6 letters
    ("eggs" after a newline is 'eg', 'gs'; " eggs" is one token)."""
    extra = 0.0
    for m in _PIECE.finditer(run):
        if m.lastgroup == "word":
            letters = len(m.group().lstrip("_.-()<+',&*[/").split("'")[0])
            if letters >= 3:
                extra += max(0.0, letters / 2.6 - _word_tokens(m.group(), False))
        if first_only:
            break
    return extra


def _start_extra(run: str) -> float:
    return _run_extra(run, True)


@functools.lru_cache(maxsize=65_536)
def _run_tokens(run: str) -> float:
    """A run between whitespace, and the whitespace before it when it starts with a digit (a
    number does not merge with the space before it: one token more)."""
    tokens = _chunk_tokens(run) + run[0].isdigit()
    if len(run) >= BASE64_RUN and _like_base64(run):
        tokens = max(tokens, len(run) * BASE64_PER_CHAR)
    return tokens


def _like_base64(run: str) -> bool:
    """Whether a run reads as encoded data: only the base64 alphabet, both cases and a digit."""
    return (_BASE64.issuperset(run) and not run.isalpha() and not run.isdigit()
            and run.lower() != run and run.upper() != run)


def _chunk_tokens(chunk: str) -> float:
    """The pieces of a run without whitespace (a word, a number, a path, a CJK sentence)."""
    total = 0.0
    for m in _PIECE.finditer(chunk):
        kind, s = m.lastgroup, m.group()
        if kind == "word":
            glued = chunk[m.start() - 1:m.start()] > "\u2e7f"  # right after a CJK character
            total += _word_tokens(s, glued)
        elif kind == "digits":
            total += math.ceil(len(s) / 3)
        elif kind == "punct":  # runs of one mark merge (---, ###, ```); mixed marks mostly not
            n = len(s)
            total += 1 + (n - 1) / 4 if len(set(s)) == 1 else max(1.0, 0.8 * n)
        elif kind == "han":
            total += 1 if s in _HAN_SINGLE_TOKEN else len(s.encode("utf-8"))
        elif s > "\uffff":
            total += _beyond_the_bmp(s)
        else:
            total += 1 if s in _CJK_PUNCT_ONE else min(3, len(s.encode("utf-8")))
    return total


def _beyond_the_bmp(char: str) -> int:
    """A character outside the Basic Multilingual Plane (4 UTF-8 bytes). o200k_base has emoji
    and the mathematical letters in three tokens at most (1,000 random emoji: 1.84 a character;
    mathematical bold 2.0, italic 3.1); a script it has few merges for costs up to a token a
    byte (Gothic letters: 3.5 a character, where 3 counted made an answer 0.81 of its count)."""
    code = ord(char)
    if 0x1F000 <= code <= 0x1FAFF or 0x1D400 <= code <= 0x1D7FF:
        return 3
    return 4


def _word_tokens(piece: str, glued: bool) -> float:
    """A letter piece: common words are one token; long, capitalised or all-capital pieces are
    split more often. `glued`: the letters follow a CJK character directly (romanised names,
    e-mail addresses), where o200k_base spends about a token on two letters."""
    piece = piece.lstrip("_.-()<+',&*[/").split("'")[0]  # the attached mark, the contraction
    upper = len(piece) - len(piece.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    lower = len(piece) - upper
    if upper == 0:
        vowels = sum(piece.count(v) for v in "aeiou")
        if glued or (lower >= 3 and vowels * 6 < lower):  # "zjfyls", pinyin, user names
            return max(1.0, lower / 2)
        return _lower_tokens(lower)
    if upper == 1 and lower:
        return 1 + max(0, len(piece) - 4) / 8
    return 1 + max(0, upper - 2) / 3 + (_lower_tokens(lower) if lower else 0)


def _lower_tokens(n: int) -> float:
    """A lowercase run of n letters."""
    return 1 + max(0, n - 8) / 6 if n <= 16 else 1 + 8 / 6 + (n - 16) / 2


# The Han characters o200k_base encodes as a single token (2,515 of the CJK blocks; every other
# one costs 2 to 4). Generated from the o200k_base vocabulary (exact_tokens.py beside this file).
_HAN_SINGLE_TOKEN = frozenset(
    "一丁七万丈三上下不与专且世丘业东丝两严並丨个中丰串临丶丸丹为主丽举乃久么义之乌乎乐乔乗乘乙九也习乡书买乱乳乾亂了予争事二"
    "于亏云互五井亚些亞亡交亦产亩享京亭亮亲人亿什仁仅今介仍从仓仔仕他付仙代令以仪们仲件价任份企伊伍伏休众优伙会伝伟传伤伦伯估"
    "伴伸似但位低住佐体何余佛作你佣佩佳使來例供依侠価侣侧侯侵便係促俄俊俗保信修俱俺個倍們倒候借倡値倫债值倾假偏做停健側偶偷偿"
    "傅備储催傳傷働像僕價億優儿允元兄充兆先光克免児兑兒兔党入內全兩八公六兰共关兴兵其具典养兼兽内円冈冊册再冒写军农冠冬冰冲决"
    "况冷冻净准凉凌减凝几凡凤処凭凯凰凸出击函刀分切刊刑划列刘则刚创初删判別利别到制刷券刺刻剂則削前剑剤剧剩剪副割創劇力办功加"
    "务动助努励劲劳効势勇勒動務勝募勢勤勿包化北匙匹区医區十千升午半华协卒卓協单卖南単博占卡卢卧卫印危即却卷卸厂厅历厉压厕厘厚"
    "原厦厨去县参參又叉及友双反収发叔取受变口古句另只叫召可台史右叶号司吃各合吉吊同名后吐向吕吗君吞吟否吧吨含听启吴吸吹吻吾呀"
    "呈告员呢周味呵呻呼命咋和咖咨咪品哈响員哥哦哪哭哲唐售唯唱商啊問啥啦啪善喊喘喜喝單営喷嗎嗯嘉嘎嘛嘴嘿噜器四回因团団园困囲図"
    "围固国图圆圈國園圖團土圣在地圳场圾址坂均坊坏坐坑块坚坛坝坡坦坪垃型埃城埔域培基堂堡報場堵塑塔塘塞填境墓増墙增墨壁壇士壮声"
    "売处备変复夏夕外多夜够夢大天太夫央失头夹夺奇奈奉奋奏契奔奖套奥女奴奶奷奸她好如妇妈妓妖妙妞妮妹妻姆始姐姑姓委姚姜姨姿威娃"
    "娇娘娛娜娱婆婚婦婷媒媳媽嫁嫂嫌嫩嬉子孔孕字存孙孟季孤学孩學宁它宅宇守安宋完宏宗官定宜宝实実宠审客宣室宫宮害宴家容宽宾宿寄"
    "密富寒寓寝察實寨寫寶寸对寺寻导対寿封専射将將專尊尋對導小少尔尖尚尝尤就尸尺尼尽尾尿局屁层居届屋屏展属履屯山岁岗岛岡岩岭岳"
    "岸峡峰島崎川州巡工左巧巨差己已巴巻币市布帅师希帐帖帝带師席帮帯帰帳帶常帽幅幕干平年并幸幻幼幽广広庄庆床序库应底店府废度座"
    "庫庭康廉廣延廷建开异弃弄弊式引弗弘弟张弱張強弹强归当录形彦彩彰影役彻彼往征径待很律後徐徒得從御復循微徳徴德徽心必忆忍志忘"
    "忙応忠忧快念忽怀态怎怒怕怖思怡急性怪总恋恐恒恢恩息恶悉悟悠患悦您悪悲情惊惑惜惠惨惯想意愛感愿慈態慎慢慧慰懂應戀戏成我戒或"
    "战戦截戰戲戴戶户戸戻房所手才扎扑扒打払托扣执扩扫扬扰扱扶批找承技把抓投抗折抜択抢护报披抱抵押抽担拆拉拍拒拓拔拖拘招拜拟拥"
    "拨择括拳拼拾拿持挂指按挑挡挣挥振挺捕损换据捷掃授掉掌排掛採探接控推措掲揉描提插換握揭援搏搜搞搬搭携摄摆摇摘摩摸撃撑撒撞撤"
    "播撮撸擊操據擦攝支收改攻放政故效敌敏救敗教敢散敦敬数整敵數文斗料斤断斯新方於施旁旅旋族旗无既日旦旧旨早旬旭时旺昂昆昌明易"
    "昔星映春昨昭是昼显時晋晒晓晚晨普景晰晴晶智暂暇暑暖暗暨暮暴曜曝曰曲更書曹曼曾替最會月有朋服朗望朝期木未末本札术朱机杀杂权"
    "杆杉李杏材村杜束条来杨杭杯杰東松板极构析林枚果枝枪架柄柏某染柔柜查柱柳柴査标栋栏树栗校株样核根格桂桃框案桌桑档桥桶梁梅條"
    "梦梨梯械检棋棒棚森植椒検楚業極楼楽概榜構様槽樂樓標模樣横橋機橹橾權欠次欢欣欧欲欺款歉歌歓歡止正此步武歩歲歳歴歷死殊残殖段"
    "殺毁毅母毎每毒比毕毛毫氏民气気氣氧水永汁求汇汉汗江池污汤決汽沁沃沈沉沒沖沙沟没沢沪河油治沿況泄泉泊法泛泡波泥注泰泳泽洁洋"
    "洗洛洞津洪洲活派流浅浆测济浓浜浦浩浪浮浴海消涉涓涙涛润涨涩涯液涵淘淡淫深混添清済渐減渠渡温測港游湖湘湾湿満源準溪滋滑滚满"
    "滤滨滴滿漂漏演漢漫潔潘潜潭潮澡澳激灣火灭灯灰灵灾炉炎炒炮炸点為炼烈烟烦烧热無焦然焼煌煙煤照熊熟熱燃燕營爆爰爱爵父爷爸爽片"
    "版牌牙牛牡牢牧物牲特犬犯状狂狐狗狠独狸狼猎猛猜猪猫献猴獸玄率玉王玖玛玩环现玲玻珍珠班現球理琪琳琴瑞璃環瓜瓣瓦瓶甘甚甜生產"
    "産用田由甲申电男甸町画畅界留略番畫異當疆疑疗疫疯疲疼疾病症痛療癌発登發白百的皆皇皮盆盈益盐监盒盖盗盘盛盟監盤目直相盾省眉"
    "看県真眠眼着睛睡督瞬知矩短石矿码砂研砖破础硕硬确碍碎碑碰確碼磁磨示礼社祖祝神祥票祭禁福禧离禽禾秀私秋种科秒秘租秦积称移程"
    "稍税種稱稳稿穆積穴究空穿突窍窗窝窥立站竞竟章童端競竹笑笔符第筆等筋筑答策筛筹签简算管箭箱節篇築篮簡籍米类粉粒粗粤粮精糕糖"
    "系紀約紅納純紙級素索紧紫累細紹終組経結絡給統絲絶經続維網総緒線締編縄縮總績繁續纠红约级纪纬纯纲纳纵纷纸纹纽线练组细织终绍"
    "经绑结绕绘给络绝统继绩绪续维综绿缓编缘缩缴缺网罗罚罩罪置署羅羊美羞群義羽翁翌習翔翠翻翼耀老考者而耐耗耳聊职联聘聚聞聪聯聲"
    "職肃肉肌肖股肤肥肩肯育肺胃胆背胎胖胜胞胡胶胸能脂脑脚脱脸腐腕腰腳腹腾腿膜膽臀臣自臭至致臺與興舍舒舔舗舞舟航般舰船艇良色艳"
    "艷艺艾节芝芬芯花芳芸芽苍苏苑苗若苦英范茶茸草荐荒荡荣药荷莉莎莓莞莫莱莲获菌菜華菲萄萌萝营萨萬落葉著葛葡董蒂蒙蒲蓝蔡蕉蕩薄"
    "薦薪薬藏藝藤虎虐虑處虚號虫虹虽蛇蛋蛛蜂蜜蝶融血行術街衛衡衣补表袋袖袜被袭裁裂装裏裕裙補裝裤裸製襪西要覆見規視覚覧親観覽觀"
    "见观规视览觉角解触言訂計訊討記訪設許訳診証評詞詢試話詳誉誌認誘語說説読誰課調談請論講謝證識警議護讀變讓计订认讨让训议讯记"
    "讲许论设访诀证评识诈诉诊词译试诗诚话询该详语误诱说请诸诺读课谁调谈谋谓谜谢谨谱谷豆豊象豪豹貌負財貨販責買貸費貼賀資賞質購"
    "贝负贡财责贤败账货质贫购贯贴贵贷贸费赁资赋赌赏赔赖赚赛赞赠赢赤赫走赴赵赶起超越趋趣足跃跌跑距跟跨路跳践踏踩踪躁身車軍転軽"
    "較載輪輯輸轉车轨轩转轮软轴轻载较辅辆辉辑输辖辛辞辣辦辨辰辱農边辺込辽达迁迅过迈迎运近返还这进远违连迟迪迫述迷迹追退送适逃"
    "逆选逊透逐递途這通速造連週進逸逻逼遂遇遊運遍過道達違遗遠遣遥適遭遮遵選避邀還邑那邦邪邮邻郎郑部郭郵都配酒酷酸醉醒醫采释里"
    "重野量金鉄鉴銀錄錯録鍵鏈鐘鑫针钟钢钥钮钱钻铁铃铜铭银铺链销锁锅锋锐错锡锦键镇镜長长門閉開間関閱閲關门闪闭问闲间闻阁阅队阪"
    "防阳阴阵阶阻阿附际陆陈陌降限院除险陪陰陵陶陷険陽隆隊階随隐隔際障难雀雄雅集雑雕雙雞離難雨雪零雷電需震霍霞露霸青靖静非靠面"
    "革鞋韓韩音響頁頂頃項順須預領頭頻頼題額顔願類页顶项顺须顾顿预领频颖颗题颜额風风飛飞食飯飲養餐館饭饮饰馆馈首香馨馬駅験驗马"
    "驰驱驶驻驾验骑骗骚骤骨骰體高鬼魂魅魏魔魚鱼鲁鲜鲸鳥鸟鸡鸣鸭鸿鹅鹏鹰鹿麗麟麦麻麼黃黄黎黑黒默點鼎鼓鼠鼻齐齢龄龍龙"
)
