import re,collections,sys
d=collections.OrderedDict(); h=None
for l in open(sys.argv[1]):
    if l.startswith('=='): h=l[3:].strip(); continue
    m=re.match(r'\s+(\d+)\s+\d+\s+\w+\s+\w+\s+\|\s+([\d.]+)\s+\S+\s+\S+\s+\S+\s+(-?\d+)',l)
    if m:
        d.setdefault(h,collections.OrderedDict()).setdefault(m.group(1),[]).append(float(m.group(2)))
        if m.group(3)!='0': print('WRONG',h,l)
    elif l.strip() and not l.startswith('#'): print('?',h,l.strip()[:200])
for h,v in d.items(): print(f'{h:28s}', '  '.join(f'{k}:{min(x):.2f}-{max(x):.2f}' for k,x in v.items()))
