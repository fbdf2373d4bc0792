#!/usr/bin/env bats
# startup.bats — what liballoc.so costs every process before it allocates, in pages: the
# small zero-filled variables every process writes at start (.bss) follow .data on the page
# the loader writes anyway (it clears the part past .data), so while they fit there they
# take no page fault of their own; the large tables that a process touches little (.lbss,
# LA_BIG_BSS in common.h) come after. A variable that outgrows the page, or a large table
# left in .bss, shows here (bench/README.md, issue 23: `/bin/true` took 9 faults in
# liballoc's .bss with the variables among the tables, 4 with them packed).
# san: skip

setup() {
	[ -f "${LIBALLOC_SO:-}" ] || skip "no $LIBALLOC_SO"
	command -v readelf >/dev/null || skip "no readelf"
}

# section NAME: "ADDRESS SIZE" of section NAME of liballoc.so, in decimal
section() {
	local at size
	read -r at size < <(readelf -S -W "$LIBALLOC_SO" |
		awk -v n="$1" '{ for (i = 1; i < NF; i++) if ($i == n) { print $(i + 2), $(i + 4); exit } }')
	[ -n "$at" ] && echo "$((16#$at)) $((16#$size))"
}

@test "liballoc.so's .bss ends on the page where .data ends" {
	read -r data_at data_size < <(section .data)
	read -r bss_at bss_size < <(section .bss)
	[ -n "$data_at" ] && [ -n "$bss_at" ]
	data_page=$(((data_at + data_size - 1) / 4096))
	bss_page=$(((bss_at + bss_size - 1) / 4096))
	echo ".data $data_at+$data_size (page $data_page), .bss $bss_at+$bss_size (page $bss_page)"
	[ "$bss_at" -ge "$((data_at + data_size))" ]
	[ "$bss_page" -eq "$data_page" ]
}

@test "liballoc.so's large tables are in .lbss, after .bss" {
	read -r bss_at bss_size < <(section .bss)
	read -r lbss_at lbss_size < <(section .lbss)
	[ -n "$lbss_at" ]
	echo ".bss $bss_at+$bss_size, .lbss $lbss_at+$lbss_size"
	[ "$lbss_at" -ge "$((bss_at + bss_size))" ]
	# the arenas (1 MiB) and the heap-owner table (4 MiB) at least
	[ "$lbss_size" -ge "$((5 << 20))" ]
}
