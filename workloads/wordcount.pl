#!/usr/bin/perl
# heaplab workload: word frequencies of a text, the classic allocation-heavy
# perl program (hashes of short strings, split, sort). Deterministic output.
use strict;
use warnings;

my %count;
my %bigram;
my $prev = "";
while (my $line = <>) {
    chomp $line;
    for my $w (split /[^a-z']+/, lc $line) {
        next if $w eq "";
        $count{$w}++;
        $bigram{"$prev $w"}++ if $prev ne "";
        $prev = $w;
    }
}
my @top = (sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count)[0 .. 29];
for my $w (@top) {
    next unless defined $w;
    printf "%8d %s\n", $count{$w}, $w;
}
my @pairs = (sort { $bigram{$b} <=> $bigram{$a} || $a cmp $b } keys %bigram)[0 .. 9];
print "-- bigrams\n";
for my $p (@pairs) {
    next unless defined $p;
    printf "%8d %s\n", $bigram{$p}, $p;
}
printf "%d distinct words, %d distinct bigrams\n", scalar(keys %count), scalar(keys %bigram);
