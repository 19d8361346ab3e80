# perl workload for the allocator tests: hashes, arrays, strings, regexes,
# sorting and references, deterministic for a seed.  Prints digests of it all.
use strict;
use warnings;
my $n = shift // 40000;
srand(42);
my (%h, @a, %words);
my @syll = qw(ka lo mi nu pe ra si tu vo xe za qu);
for my $i (1 .. $n) {
    my $w = join '', map { $syll[int rand @syll] } 1 .. 1 + int rand 5;
    $words{$w}++;
    $h{"k$i"} = [$i, $w, { sq => $i * $i, s => "x" x ($i % 37) }];
    push @a, $w . ($i % 101);
    delete $h{"k" . ($i - 50)} if $i % 3 == 0 && $i > 50;
}
my @sorted = sort { $words{$b} <=> $words{$a} || $a cmp $b } keys %words;
print "words ", scalar(keys %words), " top @sorted[0..9]\n";
my $joined = join ",", sort @a;
my $sum = 0;
$sum = ($sum * 31 + ord $_) % 1000000007 for split //, substr($joined, 0, 200000);
print "array ", scalar(@a), " digest $sum\n";
my $cnt = () = $joined =~ /(?:ka|lo)[a-z]{2,6}\d+/g;
print "matches $cnt\n";
(my $t = $joined) =~ s/([aeiou])([a-z])/$2$1/g;
print "subst ", length($t), " ", substr($t, 1000, 40), "\n";
my $tot = 0;
for my $k (sort keys %h) { $tot += $h{$k}[2]{sq} % 97 + length $h{$k}[2]{s} }
print "hash ", scalar(keys %h), " total $tot\n";
my @big = map { [ ($_) x ($_ % 50) ] } 1 .. 5000;
my $s2 = 0;
$s2 += scalar @$_ for @big;
print "lists $s2\n";
