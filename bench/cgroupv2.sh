#!/usr/bin/env bash
# Boots a VM whose kernel mounts only the unified cgroup hierarchy (cgroup
# v2) and runs bench/cgroupv2 in it: real jails of two tenants of weight
# 1000 and 100 contending for one CPU. The gateway is put in a cgroup of
# its own, with the cpu controller delegated to it as root would, so that
# it must move itself into a leaf before its jails can use the controller.
#
# Needs (Debian): qemu-system-x86 linux-image-cloud-amd64 busybox-static.
# No KVM is needed (TCG emulation; slow but a ratio is what it measures).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kernel=$(ls /boot/vmlinuz-*-cloud-amd64 | sort -V | tail -1)
CGO_ENABLED=0 go build -o "$work/root/cgv2" ./bench/cgroupv2
mkdir -p "$work/root"/{bin,dev,proc,sys,tmp,etc}
cp /bin/busybox "$work/root/bin/busybox"
# The initramfs is rootfs, which pivot_root (the jail's) cannot leave: the
# first /init copies it into a tmpfs and switches root there.
cat > "$work/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mkdir -p /newroot
/bin/busybox mount -t tmpfs root /newroot
/bin/busybox cp -a /bin /cgv2 /init2 /etc /newroot/
/bin/busybox mkdir -p /newroot/dev /newroot/proc /newroot/sys /newroot/tmp
exec /bin/busybox switch_root /newroot /init2
INIT
cat > "$work/root/init2" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t cgroup2 none /sys/fs/cgroup
echo "kernel $(uname -r), cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# As root would delegate: a cgroup for the gateway, cpu enabled for it.
echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/gateway
# Only the gateway in its cgroup, as in a service unit.
sh -c 'echo $$ > /sys/fs/cgroup/gateway/cgroup.procs; exec /cgv2'
echo "cgroupv2: exit $?"; for d in /sys/fs/cgroup /sys/fs/cgroup/gateway /sys/fs/cgroup/gateway/toolgate-jails /sys/fs/cgroup/gateway/toolgate-gateway; do echo "cgroupv2: $d ctl=$(cat $d/cgroup.controllers) sub=$(cat $d/cgroup.subtree_control) procs=$(cat $d/cgroup.procs | tr "\n" " ") type=$(cat $d/cgroup.type 2>/dev/null)"; done
poweroff -f
INIT
chmod 755 "$work/root/init" "$work/root/init2"
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"
timeout 900 qemu-system-x86_64 -machine accel=tcg -cpu max -smp 2 -m 1024 -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 lsm=landlock,yama quiet panic=-1" | tr -d '\r' | grep -E '^(kernel|cgroupv2)'
