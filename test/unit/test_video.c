/* test_video.c - unit tests for include/mv_video.h: HF frame sampling math against numpy/HF
 * tables (with the video smart_resize and pixel budget of mv_preprocess.h they feed), and FFmpeg decoding of every fixture in fixtures/media/videos/ against the frames the
 * ffmpeg CLI writes (`ffmpeg -i F -fps_mode passthrough -pix_fmt rgb24 -f rawvideo -`), bit for
 * bit, for full, sparse (seeking) and backward reads; plus rotation, the 3-frame clip, VFR
 * timestamps, broken files and the time limit; and the same frames from a descriptor, memory and
 * read callbacks (mv_input.h) as from the path. Run from the repository root.
 *
 * The tables below were generated with /usr/bin/python3 + numpy 1.24.2 by the script quoted in
 * the comment at the end of this file (the smart_resize there is transformers 5.17's
 * video_processing_qwen3_vl.smart_resize, copied verbatim).
 */
#include "mv_video.h"
#include "mv_preprocess.h"
#include "stream_io.h"
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* (total, n) pairs and np.linspace(0, total-1, n).round().astype(int), numpy 1.24.2 */
static const int64_t lin_pairs[][2] = {{1, 1}, {2, 2}, {3, 4}, {4, 3}, {5, 4}, {6, 4}, {7, 4}, {10, 4}, {11, 6}, {12, 8}, {24, 4}, {25, 4}, {30, 8}, {72, 6}, {72, 7}, {100, 7}, {101, 10}, {120, 13}, {150, 30}, {300, 21}, {999, 17}, {1000, 768}, {1234, 768}, {3, 3}, {9, 6}, {17, 16}, {49, 10}, {2, 5}, {5, 8}, {18898, 31}, {13683, 44}, {11566, 38}, {16673, 11}, {1111, 15}, {5702, 42}, {18252, 1}, {9996, 40}, {2629, 39}, {2382, 23}, {16329, 15}, {6832, 14}, {14389, 13}, {19809, 22}, {9563, 25}, {11651, 27}, {10189, 48}, {16153, 39}, {14005, 30}, {6821, 48}, {9325, 11}, {16901, 8}, {17149, 30}, {2295, 3}};
static const int64_t lin_idx[] = {0, 0, 1, 0, 1, 1, 2, 0, 2, 3, 0, 1, 3, 4, 0, 2, 3, 5, 0, 2, 4, 6, 0, 3, 6, 9, 0, 2, 4, 6, 8, 10, 0, 2, 3, 5, 6, 8, 9, 11, 0, 8, 15, 23, 0, 8, 16, 24, 0, 4, 8, 12, 17, 21, 25, 29, 0, 14, 28, 43, 57, 71, 0, 12, 24, 36, 47, 59, 71, 0, 16, 33, 50, 66, 82, 99, 0, 11, 22, 33, 44, 56, 67, 78, 89, 100, 0, 10, 20, 30, 40, 50, 60, 69, 79, 89, 99, 109, 119, 0, 5, 10, 15, 21, 26, 31, 36, 41, 46, 51, 57, 62, 67, 72, 77, 82, 87, 92, 98, 103, 108, 113, 118, 123, 128, 134, 139, 144, 149, 0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 164, 179, 194, 209, 224, 239, 254, 269, 284, 299, 0, 62, 125, 187, 250, 312, 374, 437, 499, 561, 624, 686, 748, 811, 873, 936, 998, 0, 1, 3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 16, 17, 18, 20, 21, 22, 23, 25, 26, 27, 29, 30, 31, 33, 34, 35, 36, 38, 39, 40, 42, 43, 44, 46, 47, 48, 49, 51, 52, 53, 55, 56, 57, 59, 60, 61, 63, 64, 65, 66, 68, 69, 70, 72, 73, 74, 76, 77, 78, 79, 81, 82, 83, 85, 86, 87, 89, 90, 91, 92, 94, 95, 96, 98, 99, 100, 102, 103, 104, 106, 107, 108, 109, 111, 112, 113, 115, 116, 117, 119, 120, 121, 122, 124, 125, 126, 128, 129, 130, 132, 133, 134, 135, 137, 138, 139, 141, 142, 143, 145, 146, 147, 148, 150, 151, 152, 154, 155, 156, 158, 159, 160, 162, 163, 164, 165, 167, 168, 169, 171, 172, 173, 175, 176, 177, 178, 180, 181, 182, 184, 185, 186, 188, 189, 190, 191, 193, 194, 195, 197, 198, 199, 201, 202, 203, 204, 206, 207, 208, 210, 211, 212, 214, 215, 216, 218, 219, 220, 221, 223, 224, 225, 227, 228, 229, 231, 232, 233, 234, 236, 237, 238, 240, 241, 242, 244, 245, 246, 247, 249, 250, 251, 253, 254, 255, 257, 258, 259, 260, 262, 263, 264, 266, 267, 268, 270, 271, 272, 274, 275, 276, 277, 279, 280, 281, 283, 284, 285, 287, 288, 289, 290, 292, 293, 294, 296, 297, 298, 300, 301, 302, 303, 305, 306, 307, 309, 310, 311, 313, 314, 315, 317, 318, 319, 320, 322, 323, 324, 326, 327, 328, 330, 331, 332, 333, 335, 336, 337, 339, 340, 341, 343, 344, 345, 346, 348, 349, 350, 352, 353, 354, 356, 357, 358, 359, 361, 362, 363, 365, 366, 367, 369, 370, 371, 373, 374, 375, 376, 378, 379, 380, 382, 383, 384, 386, 387, 388, 389, 391, 392, 393, 395, 396, 397, 399, 400, 401, 402, 404, 405, 406, 408, 409, 410, 412, 413, 414, 415, 417, 418, 419, 421, 422, 423, 425, 426, 427, 429, 430, 431, 432, 434, 435, 436, 438, 439, 440, 442, 443, 444, 445, 447, 448, 449, 451, 452, 453, 455, 456, 457, 458, 460, 461, 462, 464, 465, 466, 468, 469, 470, 471, 473, 474, 475, 477, 478, 479, 481, 482, 483, 485, 486, 487, 488, 490, 491, 492, 494, 495, 496, 498, 499, 500, 501, 503, 504, 505, 507, 508, 509, 511, 512, 513, 514, 516, 517, 518, 520, 521, 522, 524, 525, 526, 528, 529, 530, 531, 533, 534, 535, 537, 538, 539, 541, 542, 543, 544, 546, 547, 548, 550, 551, 552, 554, 555, 556, 557, 559, 560, 561, 563, 564, 565, 567, 568, 569, 570, 572, 573, 574, 576, 577, 578, 580, 581, 582, 584, 585, 586, 587, 589, 590, 591, 593, 594, 595, 597, 598, 599, 600, 602, 603, 604, 606, 607, 608, 610, 611, 612, 613, 615, 616, 617, 619, 620, 621, 623, 624, 625, 626, 628, 629, 630, 632, 633, 634, 636, 637, 638, 640, 641, 642, 643, 645, 646, 647, 649, 650, 651, 653, 654, 655, 656, 658, 659, 660, 662, 663, 664, 666, 667, 668, 669, 671, 672, 673, 675, 676, 677, 679, 680, 681, 682, 684, 685, 686, 688, 689, 690, 692, 693, 694, 696, 697, 698, 699, 701, 702, 703, 705, 706, 707, 709, 710, 711, 712, 714, 715, 716, 718, 719, 720, 722, 723, 724, 725, 727, 728, 729, 731, 732, 733, 735, 736, 737, 739, 740, 741, 742, 744, 745, 746, 748, 749, 750, 752, 753, 754, 755, 757, 758, 759, 761, 762, 763, 765, 766, 767, 768, 770, 771, 772, 774, 775, 776, 778, 779, 780, 781, 783, 784, 785, 787, 788, 789, 791, 792, 793, 795, 796, 797, 798, 800, 801, 802, 804, 805, 806, 808, 809, 810, 811, 813, 814, 815, 817, 818, 819, 821, 822, 823, 824, 826, 827, 828, 830, 831, 832, 834, 835, 836, 837, 839, 840, 841, 843, 844, 845, 847, 848, 849, 851, 852, 853, 854, 856, 857, 858, 860, 861, 862, 864, 865, 866, 867, 869, 870, 871, 873, 874, 875, 877, 878, 879, 880, 882, 883, 884, 886, 887, 888, 890, 891, 892, 893, 895, 896, 897, 899, 900, 901, 903, 904, 905, 907, 908, 909, 910, 912, 913, 914, 916, 917, 918, 920, 921, 922, 923, 925, 926, 927, 929, 930, 931, 933, 934, 935, 936, 938, 939, 940, 942, 943, 944, 946, 947, 948, 950, 951, 952, 953, 955, 956, 957, 959, 960, 961, 963, 964, 965, 966, 968, 969, 970, 972, 973, 974, 976, 977, 978, 979, 981, 982, 983, 985, 986, 987, 989, 990, 991, 992, 994, 995, 996, 998, 999, 0, 2, 3, 5, 6, 8, 10, 11, 13, 14, 16, 18, 19, 21, 23, 24, 26, 27, 29, 31, 32, 34, 35, 37, 39, 40, 42, 43, 45, 47, 48, 50, 51, 53, 55, 56, 58, 59, 61, 63, 64, 66, 68, 69, 71, 72, 74, 76, 77, 79, 80, 82, 84, 85, 87, 88, 90, 92, 93, 95, 96, 98, 100, 101, 103, 104, 106, 108, 109, 111, 113, 114, 116, 117, 119, 121, 122, 124, 125, 127, 129, 130, 132, 133, 135, 137, 138, 140, 141, 143, 145, 146, 148, 150, 151, 153, 154, 156, 158, 159, 161, 162, 164, 166, 167, 169, 170, 172, 174, 175, 177, 178, 180, 182, 183, 185, 186, 188, 190, 191, 193, 195, 196, 198, 199, 201, 203, 204, 206, 207, 209, 211, 212, 214, 215, 217, 219, 220, 222, 223, 225, 227, 228, 230, 231, 233, 235, 236, 238, 240, 241, 243, 244, 246, 248, 249, 251, 252, 254, 256, 257, 259, 260, 262, 264, 265, 267, 268, 270, 272, 273, 275, 277, 278, 280, 281, 283, 285, 286, 288, 289, 291, 293, 294, 296, 297, 299, 301, 302, 304, 305, 307, 309, 310, 312, 313, 315, 317, 318, 320, 322, 323, 325, 326, 328, 330, 331, 333, 334, 336, 338, 339, 341, 342, 344, 346, 347, 349, 350, 352, 354, 355, 357, 358, 360, 362, 363, 365, 367, 368, 370, 371, 373, 375, 376, 378, 379, 381, 383, 384, 386, 387, 389, 391, 392, 394, 395, 397, 399, 400, 402, 403, 405, 407, 408, 410, 412, 413, 415, 416, 418, 420, 421, 423, 424, 426, 428, 429, 431, 432, 434, 436, 437, 439, 440, 442, 444, 445, 447, 449, 450, 452, 453, 455, 457, 458, 460, 461, 463, 465, 466, 468, 469, 471, 473, 474, 476, 477, 479, 481, 482, 484, 485, 487, 489, 490, 492, 494, 495, 497, 498, 500, 502, 503, 505, 506, 508, 510, 511, 513, 514, 516, 518, 519, 521, 522, 524, 526, 527, 529, 530, 532, 534, 535, 537, 539, 540, 542, 543, 545, 547, 548, 550, 551, 553, 555, 556, 558, 559, 561, 563, 564, 566, 567, 569, 571, 572, 574, 576, 577, 579, 580, 582, 584, 585, 587, 588, 590, 592, 593, 595, 596, 598, 600, 601, 603, 604, 606, 608, 609, 611, 612, 614, 616, 617, 619, 621, 622, 624, 625, 627, 629, 630, 632, 633, 635, 637, 638, 640, 641, 643, 645, 646, 648, 649, 651, 653, 654, 656, 657, 659, 661, 662, 664, 666, 667, 669, 670, 672, 674, 675, 677, 678, 680, 682, 683, 685, 686, 688, 690, 691, 693, 694, 696, 698, 699, 701, 703, 704, 706, 707, 709, 711, 712, 714, 715, 717, 719, 720, 722, 723, 725, 727, 728, 730, 731, 733, 735, 736, 738, 739, 741, 743, 744, 746, 748, 749, 751, 752, 754, 756, 757, 759, 760, 762, 764, 765, 767, 768, 770, 772, 773, 775, 776, 778, 780, 781, 783, 784, 786, 788, 789, 791, 793, 794, 796, 797, 799, 801, 802, 804, 805, 807, 809, 810, 812, 813, 815, 817, 818, 820, 821, 823, 825, 826, 828, 830, 831, 833, 834, 836, 838, 839, 841, 842, 844, 846, 847, 849, 850, 852, 854, 855, 857, 858, 860, 862, 863, 865, 866, 868, 870, 871, 873, 875, 876, 878, 879, 881, 883, 884, 886, 887, 889, 891, 892, 894, 895, 897, 899, 900, 902, 903, 905, 907, 908, 910, 911, 913, 915, 916, 918, 920, 921, 923, 924, 926, 928, 929, 931, 932, 934, 936, 937, 939, 940, 942, 944, 945, 947, 948, 950, 952, 953, 955, 956, 958, 960, 961, 963, 965, 966, 968, 969, 971, 973, 974, 976, 977, 979, 981, 982, 984, 985, 987, 989, 990, 992, 993, 995, 997, 998, 1000, 1002, 1003, 1005, 1006, 1008, 1010, 1011, 1013, 1014, 1016, 1018, 1019, 1021, 1022, 1024, 1026, 1027, 1029, 1030, 1032, 1034, 1035, 1037, 1038, 1040, 1042, 1043, 1045, 1047, 1048, 1050, 1051, 1053, 1055, 1056, 1058, 1059, 1061, 1063, 1064, 1066, 1067, 1069, 1071, 1072, 1074, 1075, 1077, 1079, 1080, 1082, 1083, 1085, 1087, 1088, 1090, 1092, 1093, 1095, 1096, 1098, 1100, 1101, 1103, 1104, 1106, 1108, 1109, 1111, 1112, 1114, 1116, 1117, 1119, 1120, 1122, 1124, 1125, 1127, 1129, 1130, 1132, 1133, 1135, 1137, 1138, 1140, 1141, 1143, 1145, 1146, 1148, 1149, 1151, 1153, 1154, 1156, 1157, 1159, 1161, 1162, 1164, 1165, 1167, 1169, 1170, 1172, 1174, 1175, 1177, 1178, 1180, 1182, 1183, 1185, 1186, 1188, 1190, 1191, 1193, 1194, 1196, 1198, 1199, 1201, 1202, 1204, 1206, 1207, 1209, 1210, 1212, 1214, 1215, 1217, 1219, 1220, 1222, 1223, 1225, 1227, 1228, 1230, 1231, 1233, 0, 1, 2, 0, 2, 3, 5, 6, 8, 0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 0, 5, 11, 16, 21, 27, 32, 37, 43, 48, 0, 0, 0, 1, 1, 0, 1, 1, 2, 2, 3, 3, 4, 0, 630, 1260, 1890, 2520, 3150, 3779, 4409, 5039, 5669, 6299, 6929, 7559, 8189, 8819, 9448, 10078, 10708, 11338, 11968, 12598, 13228, 13858, 14488, 15118, 15748, 16377, 17007, 17637, 18267, 18897, 0, 318, 636, 955, 1273, 1591, 1909, 2227, 2545, 2864, 3182, 3500, 3818, 4136, 4455, 4773, 5091, 5409, 5727, 6046, 6364, 6682, 7000, 7318, 7636, 7955, 8273, 8591, 8909, 9227, 9546, 9864, 10182, 10500, 10818, 11137, 11455, 11773, 12091, 12409, 12727, 13046, 13364, 13682, 0, 313, 625, 938, 1250, 1563, 1875, 2188, 2501, 2813, 3126, 3438, 3751, 4063, 4376, 4689, 5001, 5314, 5626, 5939, 6251, 6564, 6876, 7189, 7502, 7814, 8127, 8439, 8752, 9064, 9377, 9690, 10002, 10315, 10627, 10940, 11252, 11565, 0, 1667, 3334, 5002, 6669, 8336, 10003, 11670, 13338, 15005, 16672, 0, 79, 159, 238, 317, 396, 476, 555, 634, 714, 793, 872, 951, 1031, 1110, 0, 139, 278, 417, 556, 695, 834, 973, 1112, 1251, 1390, 1530, 1669, 1808, 1947, 2086, 2225, 2364, 2503, 2642, 2781, 2920, 3059, 3198, 3337, 3476, 3615, 3754, 3893, 4032, 4171, 4311, 4450, 4589, 4728, 4867, 5006, 5145, 5284, 5423, 5562, 5701, 0, 0, 256, 513, 769, 1025, 1281, 1538, 1794, 2050, 2307, 2563, 2819, 3075, 3332, 3588, 3844, 4101, 4357, 4613, 4869, 5126, 5382, 5638, 5894, 6151, 6407, 6663, 6920, 7176, 7432, 7688, 7945, 8201, 8457, 8714, 8970, 9226, 9482, 9739, 9995, 0, 69, 138, 207, 277, 346, 415, 484, 553, 622, 692, 761, 830, 899, 968, 1037, 1107, 1176, 1245, 1314, 1383, 1452, 1521, 1591, 1660, 1729, 1798, 1867, 1936, 2006, 2075, 2144, 2213, 2282, 2351, 2421, 2490, 2559, 2628, 0, 108, 216, 325, 433, 541, 649, 758, 866, 974, 1082, 1190, 1299, 1407, 1515, 1623, 1732, 1840, 1948, 2056, 2165, 2273, 2381, 0, 1166, 2333, 3499, 4665, 5831, 6998, 8164, 9330, 10497, 11663, 12829, 13995, 15162, 16328, 0, 525, 1051, 1576, 2102, 2627, 3153, 3678, 4204, 4729, 5255, 5780, 6306, 6831, 0, 1199, 2398, 3597, 4796, 5995, 7194, 8393, 9592, 10791, 11990, 13189, 14388, 0, 943, 1886, 2830, 3773, 4716, 5659, 6603, 7546, 8489, 9432, 10376, 11319, 12262, 13205, 14149, 15092, 16035, 16978, 17922, 18865, 19808, 0, 398, 797, 1195, 1594, 1992, 2390, 2789, 3187, 3586, 3984, 4383, 4781, 5179, 5578, 5976, 6375, 6773, 7172, 7570, 7968, 8367, 8765, 9164, 9562, 0, 448, 896, 1344, 1792, 2240, 2688, 3137, 3585, 4033, 4481, 4929, 5377, 5825, 6273, 6721, 7169, 7617, 8065, 8513, 8962, 9410, 9858, 10306, 10754, 11202, 11650, 0, 217, 434, 650, 867, 1084, 1301, 1517, 1734, 1951, 2168, 2384, 2601, 2818, 3035, 3251, 3468, 3685, 3902, 4119, 4335, 4552, 4769, 4986, 5202, 5419, 5636, 5853, 6069, 6286, 6503, 6720, 6937, 7153, 7370, 7587, 7804, 8020, 8237, 8454, 8671, 8887, 9104, 9321, 9538, 9754, 9971, 10188, 0, 425, 850, 1275, 1700, 2125, 2550, 2975, 3400, 3825, 4251, 4676, 5101, 5526, 5951, 6376, 6801, 7226, 7651, 8076, 8501, 8926, 9351, 9776, 10201, 10626, 11051, 11476, 11901, 12327, 12752, 13177, 13602, 14027, 14452, 14877, 15302, 15727, 16152, 0, 483, 966, 1449, 1932, 2414, 2897, 3380, 3863, 4346, 4829, 5312, 5795, 6278, 6761, 7243, 7726, 8209, 8692, 9175, 9658, 10141, 10624, 11107, 11590, 12072, 12555, 13038, 13521, 14004, 0, 145, 290, 435, 580, 726, 871, 1016, 1161, 1306, 1451, 1596, 1741, 1886, 2031, 2177, 2322, 2467, 2612, 2757, 2902, 3047, 3192, 3337, 3483, 3628, 3773, 3918, 4063, 4208, 4353, 4498, 4643, 4789, 4934, 5079, 5224, 5369, 5514, 5659, 5804, 5949, 6094, 6240, 6385, 6530, 6675, 6820, 0, 932, 1865, 2797, 3730, 4662, 5594, 6527, 7459, 8392, 9324, 0, 2414, 4829, 7243, 9657, 12071, 14486, 16900, 0, 591, 1183, 1774, 2365, 2957, 3548, 4139, 4730, 5322, 5913, 6504, 7096, 7687, 8278, 8870, 9461, 10052, 10644, 11235, 11826, 12418, 13009, 13600, 14191, 14783, 15374, 15965, 16557, 17148, 0, 1147, 2294};
static const struct { int64_t total; double vfps, fps; int mn, mx, want; } nf_cases[] = {
    {72, 24, 2, 4, 768, 6},
    {3, 10, 2, 4, 768, 3},
    {24, 7.384615384615385, 2, 4, 768, 6},
    {10, 10, 2, 4, 768, 4},
    {100000, 30, 2, 4, 768, 768},
    {301, 29.969999999999999, 2, 4, 768, 20},
    {120, 29.970029970029969, 2, 4, 768, 8},
    {45, 25, 1, 4, 768, 4},
    {45, 25, 0.5, 4, 768, 4},
    {1000, 24, 3, 4, 100, 100},
    {50, -1, 2, 4, 768, 4},
    {7, 24, -1, 4, 768, 7},
    {2, 24, -1, 4, 768, 4},
    {900, 24, -1, 4, 768, 768},
    {241, 60, 2, 4, 768, 8},
};
static const struct { int t, h, w; long long mn, mx; int oh, ow; } sr_cases[] = {
    {4, 64, 96, 4096, 25165824, 64, 96},
    {2, 96, 128, 131072, 786432, 224, 320},
    {3, 61, 97, 131072, 786432, 192, 288},
    {24, 1080, 1920, 4096, 25165824, 768, 1344},
    {768, 1080, 1920, 4096, 25165824, 128, 224},
    {16, 720, 1280, 131072, 786432, 160, 288},
    {5, 20, 300, 4096, 25165824, 32, 480},
    {6, 33, 31, 4096, 25165824, 32, 32},
    {30, 480, 640, 4096, 25165824, 480, 640},
    {7, 100, 150, 4096, 25165824, 96, 160},
    {4, 16, 16, 131072, 786432, 192, 192},
    {12, 1920, 1080, 131072, 786432, 320, 192},
    {9, 49, 81, 4096, 786432, 64, 96},
    {2, 31, 6000, 4096, 25165824, 32, 6208},
    {10, 3, 500, 4096, 25165824, 32, 5344},
    {2, 20, 5000, 4096, 25165824, -1, -1},
    {3, 48, 48, 4096, 25165824, 64, 64},
    {1, 64, 64, 4096, 25165824, -1, -1},
};
static const struct { int t, f; long long mn, mx, want; } cap_cases[] = {
    {4, 32, 131072, 786432, 786432},
    {100, 32, 131072, 786432, 13762500},
    {1, 32, 4096, 25165824, 786432},
    {768, 32, 4096, 25165824, 25165824},
    {3, 32, 12345, 786432, 786432},
};

static void test_sampling(void)
{
    size_t off = 0;
    int bad = 0;
    for (size_t c = 0; c < sizeof lin_pairs / sizeof lin_pairs[0]; c++) {
        int64_t total = lin_pairs[c][0];
        int n = (int)lin_pairs[c][1];
        int64_t *idx = malloc(n * sizeof *idx);
        mv_video_indices(total, n, idx);
        for (int i = 0; i < n; i++)
            if (idx[i] != lin_idx[off + i]) {
                if (!bad)
                    printf("# indices total=%lld n=%d: [%d] = %lld, numpy %lld\n", (long long)total, n, i,
                           (long long)idx[i], (long long)lin_idx[off + i]);
                bad++;
            }
        off += n;
        free(idx);
    }
    CHECK(off == sizeof lin_idx / sizeof lin_idx[0], "indices table consumed (%zu entries)", off);
    CHECK(bad == 0, "mv_video_indices equals np.linspace(...).round() for %zu (total, n) pairs (%d wrong)",
          sizeof lin_pairs / sizeof lin_pairs[0], bad);
    int64_t i3[3];
    mv_video_indices(4, 3, i3); /* linspace(0,3,3) = 0, 1.5, 3: half to even gives 2 */
    CHECK(i3[0] == 0 && i3[1] == 2 && i3[2] == 3, "half-to-even: indices(4, 3) = 0 2 3 (got %lld %lld %lld)",
          (long long)i3[0], (long long)i3[1], (long long)i3[2]);

    for (size_t c = 0; c < sizeof nf_cases / sizeof nf_cases[0]; c++) {
        int got = mv_video_num_frames(nf_cases[c].total, nf_cases[c].vfps, nf_cases[c].fps, nf_cases[c].mn,
                                      nf_cases[c].mx);
        CHECK(got == nf_cases[c].want, "num_frames(total=%lld, video_fps=%g, fps=%g, %d..%d) = %d (HF %d)",
              (long long)nf_cases[c].total, nf_cases[c].vfps, nf_cases[c].fps, nf_cases[c].mn, nf_cases[c].mx,
              got, nf_cases[c].want);
    }
    for (size_t c = 0; c < sizeof sr_cases / sizeof sr_cases[0]; c++) {
        mv_err e = {{0}};
        int oh = -1, ow = -1;
        mv_status st = mv_smart_resize_video(sr_cases[c].t, sr_cases[c].h, sr_cases[c].w, 32, 2, sr_cases[c].mn,
                                             sr_cases[c].mx, &oh, &ow, &e);
        if (sr_cases[c].oh < 0)
            CHECK(st == MV_ERR_FORMAT && strstr(e.msg, "smart_resize"),
                  "smart_resize(t=%d, %dx%d) raises like HF: %s", sr_cases[c].t, sr_cases[c].w, sr_cases[c].h,
                  e.msg);
        else
            CHECK(st == MV_OK && oh == sr_cases[c].oh && ow == sr_cases[c].ow,
                  "smart_resize(t=%d, h=%d, w=%d, %lld..%lld) = %dx%d (HF %dx%d)", sr_cases[c].t, sr_cases[c].h,
                  sr_cases[c].w, sr_cases[c].mn, sr_cases[c].mx, oh, ow, sr_cases[c].oh, sr_cases[c].ow);
    }
    for (size_t c = 0; c < sizeof cap_cases / sizeof cap_cases[0]; c++) {
        /* the per-frame cap as the pipeline applies it (mv_video_max_pixels, max_video_tokens 768) */
        mv_preproc_config pp;
        mv_preproc_defaults(&pp);
        pp.patch = cap_cases[c].f / 2;
        pp.merge = 2;
        pp.video_min_pixels = cap_cases[c].mn;
        pp.video_max_pixels = cap_cases[c].mx;
        pp.video_frame_cap = 1;
        pp.max_video_tokens = 768;
        long long got = mv_video_max_pixels(&pp, cap_cases[c].t);
        CHECK(got == cap_cases[c].want, "capped max_pixels(t=%d) = %lld (HF %lld)", cap_cases[c].t, got,
              cap_cases[c].want);
    }
}

#define VDIR "fixtures/media/videos/"

#ifdef MV_HAVE_FFMPEG
/* All frames of path as the ffmpeg CLI writes them; *nframes of fsz bytes. NULL if it failed.
 * With MVEMBED_VIDEO_REF=DIR set, reads DIR/<file name>.rgb instead (the same bytes saved on a
 * machine with the CLI, for machines without it). */
static uint8_t *cli_frames(const char *path, size_t fsz, int64_t *nframes)
{
    char cmd[1024];
    const char *refdir = getenv("MVEMBED_VIDEO_REF");
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (refdir && *refdir)
        snprintf(cmd, sizeof cmd, "cat '%s/%s.rgb'", refdir, base);
    else
        snprintf(cmd, sizeof cmd,
                 "ffmpeg -v error -nostdin -i '%s' -map 0:v:0 -fps_mode passthrough -pix_fmt rgb24 -f rawvideo -",
                 path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = fsz * 16, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (len == cap)
            buf = realloc(buf, cap *= 2);
        size_t r = fread(buf + len, 1, cap - len, p);
        if (r == 0)
            break;
        len += r;
    }
    int rc = pclose(p);
    if (rc != 0 || len % fsz != 0) {
        free(buf);
        return NULL;
    }
    *nframes = (int64_t)(len / fsz);
    return buf;
}

/* Compares frames read for idx[0..n) with the CLI's; returns the number of differing frames. */
static int diff_frames(const uint8_t *got, const uint8_t *ref, const int64_t *idx, int n, size_t fsz, int *maxd)
{
    int bad = 0;
    *maxd = 0;
    for (int k = 0; k < n; k++) {
        const uint8_t *a = got + fsz * k, *b = ref + fsz * idx[k];
        if (memcmp(a, b, fsz) != 0) {
            bad++;
            for (size_t i = 0; i < fsz; i++) {
                int d = abs((int)a[i] - (int)b[i]);
                if (d > *maxd)
                    *maxd = d;
            }
        }
    }
    return bad;
}

static const char *fixtures[] = {
    "h264_192x128_24fps.mp4", "h264_3frames.mp4",   "h264_97x61_yuv444p.mp4", "h264_rotate90.mp4",
    "h264_rotate180.mp4",     "h264_rotate270.mp4", "h264_vfr.mp4",           "hevc_main10_128x96.mp4",
    "vp9_160x96.webm",        "vp9_97x61.webm",     "mpeg4_128x96.avi",       "av1_128x96.mp4",
    "h264_cut_midgop.ts",
};

/* Checks the video at path (name: for messages) against the ffmpeg CLI: frame count, every frame,
 * HF's 2-fps sparse sample, and backward / repeated reads. */
static void test_video_file(const char *path, const char *name)
{
    mv_err e = {{0}};
    mv_video *v = NULL;
    mv_video_info info;
    mv_status st = mv_video_open(path, &v, &info, &e);
    CHECK(st == MV_OK, "%s: open (%s)", name, st == MV_OK ? info.codec : e.msg);
    if (st != MV_OK)
        return;
    size_t fsz = (size_t)info.width * info.height * 3;
    int64_t nref = 0;
    uint8_t *ref = cli_frames(path, fsz, &nref);
    CHECK(ref != NULL, "%s: ffmpeg CLI reference frames (%dx%d)", name, info.width, info.height);
    if (!ref) {
        mv_video_close(v);
        return;
    }
    CHECK(info.total_frames == nref, "%s: total_frames %lld == CLI frame count %lld", name,
          (long long)info.total_frames, (long long)nref);
    int64_t n = info.total_frames < nref ? info.total_frames : nref;
    int64_t *all = malloc(n * sizeof *all);
    for (int64_t i = 0; i < n; i++)
        all[i] = i;
    uint8_t *fr = NULL;
    int maxd = 0;
    st = mv_video_read(v, all, (int)n, &fr, NULL, &e);
    CHECK(st == MV_OK, "%s: read all %lld frames (%s)", name, (long long)n, st == MV_OK ? "ok" : e.msg);
    if (st == MV_OK) {
        int bad = diff_frames(fr, ref, all, (int)n, fsz, &maxd);
        CHECK(bad == 0, "%s: all frames equal the CLI's bit for bit (%d differ, max |diff| %d)", name, bad, maxd);
    }
    free(fr);
    mv_video_close(v);

    /* sparse read on a fresh handle: HF's 2-fps sampling */
    st = mv_video_open(path, &v, &info, &e);
    CHECK(st == MV_OK, "%s: reopen (%s)", name, st == MV_OK ? "ok" : e.msg);
    if (st == MV_OK) {
        int ns = mv_video_num_frames(n, info.fps, 2.0, 4, 768);
        int64_t idx[768];
        mv_video_indices(n, ns, idx);
        int64_t before = mv_video_decoded_frames(v);
        st = mv_video_read(v, idx, ns, &fr, NULL, &e);
        int64_t used = mv_video_decoded_frames(v) - before;
        CHECK(st == MV_OK, "%s: sparse read of %d frames (%s)", name, ns, st == MV_OK ? "ok" : e.msg);
        if (st == MV_OK) {
            int bad = diff_frames(fr, ref, idx, ns, fsz, &maxd);
            CHECK(bad == 0, "%s: sparse frames equal the CLI's (%d differ, max |diff| %d; %lld frames decoded)",
                  name, bad, maxd, (long long)used);
        }
        free(fr);
        /* backward and repeated reads on the same handle */
        int64_t back[4][2] = {{n - 1, n - 1}, {0, 0}, {n / 2, n / 2 + (n > 1)}, {1 % n, n - 1}};
        for (int b = 0; b < 4; b++) {
            st = mv_video_read(v, back[b], 2, &fr, NULL, &e);
            int bad = st == MV_OK ? diff_frames(fr, ref, back[b], 2, fsz, &maxd) : -1;
            CHECK(st == MV_OK && bad == 0, "%s: read [%lld, %lld] after other reads equals the CLI (%s)", name,
                  (long long)back[b][0], (long long)back[b][1], st == MV_OK ? "ok" : e.msg);
            free(fr);
        }
        mv_video_close(v);
    }
    free(all);
    free(ref);
}

static void test_fixture(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, VDIR "%s", name);
    test_video_file(path, name);
}

/* Videos from a descriptor, memory and read callbacks (mv_video_open_input): every frame equals
 * the CLI's, as from the path; a stream that fails names the input. */
static void test_inputs(void)
{
    static const char *names[] = {"h264_192x128_24fps.mp4", "vp9_97x61.webm", "mpeg4_128x96.avi", "h264_cut_midgop.ts"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, VDIR "%s", names[i]);
        uint8_t *buf;
        size_t len = 0;
        mv_err e = {{0}};
        int fd;
        if (open_fixture(path, &fd, &buf, &len) != 0) {
            CHECK(0, "%s: open and read", path);
            continue;
        }
        uint8_t *ref = NULL;
        int64_t nref = 0;
        const char *what[3] = {"a descriptor", "memory", "callbacks (4000 bytes a read)"};
        for (int k = 0; k < 3; k++) {
            mv_input in;
            stream s = {buf, len, 0, 4000, -1, 0};
            mv_status st = k == 0 ? mv_input_open_fd(&in, fd, path, &e)
                           : k == 1 ? mv_input_open_mem(&in, buf, len, path, &e)
                                    : mv_input_open_io(&in, &stream_io, &s, path, &e);
            mv_video *v = NULL;
            mv_video_info info;
            if (st == MV_OK) st = mv_video_open_input(&in, NULL, &v, &info, &e);
            size_t fsz = st == MV_OK ? (size_t)info.width * info.height * 3 : 0;
            if (st == MV_OK && !ref) ref = cli_frames(path, fsz, &nref);
            int bad = -1, maxd = 0;
            uint8_t *fr = NULL;
            if (st == MV_OK && ref && info.total_frames == nref) {
                int64_t *all = malloc(nref * sizeof *all);
                for (int64_t j = 0; j < nref; j++) all[j] = j;
                st = mv_video_read(v, all, (int)nref, &fr, NULL, &e);
                if (st == MV_OK) bad = diff_frames(fr, ref, all, (int)nref, fsz, &maxd);
                free(all);
            }
            CHECK(st == MV_OK && bad == 0, "%s from %s: %lld frames equal the CLI's (%s)", names[i], what[k],
                  (long long)nref, st == MV_OK ? "ok" : e.msg);
            free(fr);
            mv_video_close(v);
            mv_input_close(&in);
        }
        mv_input in;
        stream s = {buf, len, 0, 4000, (long)len / 2, 0};
        mv_video *v = NULL;
        mv_video_info info;
        mv_status st = mv_input_open_io(&in, &stream_io, &s, "shard.tar/clip.mp4", &e);
        if (st == MV_OK) st = mv_video_open_input(&in, NULL, &v, &info, &e);
        CHECK(st == MV_ERR_IO && !v && !strcmp(e.msg, "shard.tar/clip.mp4: read error: member data unreadable: damaged archive"),
              "%s: a stream failing half way fails the open: %s", names[i], e.msg);
        mv_input_close(&in);
        close(fd);
        free(ref);
        free(buf);
    }
}

static void test_specifics(void)
{
    mv_err e = {{0}};
    mv_video *v = NULL;
    mv_video_info info;
    mv_status st;
    /* file names carry the `rotate=` tag given to FFmpeg 5.1's mov muxer; the CLI reads the
     * resulting matrices back as turns of 270 (transpose=cclock) and 90 (transpose=clock) */
    static const struct { const char *name; int w, h, rot; } rot[] = {
        {"h264_rotate90.mp4", 96, 128, 270}, {"h264_rotate270.mp4", 96, 128, 90}, {"h264_rotate180.mp4", 128, 96, 180}};
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, VDIR "%s", rot[i].name);
        st = mv_video_open(path, &v, &info, &e);
        CHECK(st == MV_OK && info.width == rot[i].w && info.height == rot[i].h && info.rotation == rot[i].rot,
              "%s: %dx%d rotation %d after rotation (want %dx%d, %d)", rot[i].name, info.width, info.height,
              info.rotation, rot[i].w, rot[i].h, rot[i].rot);
        mv_video_close(v);
    }

    st = mv_video_open(VDIR "h264_3frames.mp4", &v, &info, &e);
    CHECK(st == MV_OK && info.total_frames == 3 && info.fps == 10.0 && fabs(info.duration - 0.3) < 1e-12,
          "3-frame clip: total 3, fps 10, duration 0.3 (got %lld, %g, %g)", (long long)info.total_frames,
          info.fps, info.duration);
    if (st == MV_OK) {
        int n = mv_video_num_frames(info.total_frames, info.fps, 2.0, 4, 768);
        CHECK(n == 3, "3-frame clip samples min(max(0, 4), 768, 3) = 3 frames (got %d)", n);
        int oh, ow;
        CHECK(mv_smart_resize_video(n, info.height, info.width, 32, 2, 4096, 25165824, &oh, &ow, &e) == MV_OK &&
                  oh == 64 && ow == 96,
              "3-frame clip: smart_resize 96x64 stays 96x64 (got %dx%d)", ow, oh);
        mv_video_close(v);
    }

    static const double vfr_ms[] = {0,    100,  200,  300,  400,  500,  600,  700,  800,  1050, 1300, 1550,
                                    1800, 2050, 2300, 2549, 2799, 2849, 2900, 2949, 3000, 3049, 3099, 3150};
    st = mv_video_open(VDIR "h264_vfr.mp4", &v, &info, &e);
    CHECK(st == MV_OK && info.total_frames == 24 && fabs(info.fps - 96.0 / 13.0) < 1e-12,
          "VFR clip: 24 frames, average rate 96/13 (got %lld, %.15g)", (long long)info.total_frames, info.fps);
    if (st == MV_OK) {
        int64_t idx[6] = {0, 8, 9, 15, 17, 23};
        double ts[6];
        uint8_t *fr = NULL;
        st = mv_video_read(v, idx, 6, &fr, ts, &e);
        int ok = st == MV_OK;
        for (int k = 0; ok && k < 6; k++)
            ok = fabs(ts[k] - vfr_ms[idx[k]] / 1000.0) < 1e-9;
        CHECK(ok, "VFR clip: frames 0 8 9 15 17 23 at %g %g %g %g %g %g s (%s)", ts[0], ts[1], ts[2], ts[3],
              ts[4], ts[5], st == MV_OK ? "ok" : e.msg);
        free(fr);
        mv_video_close(v);
    }

    /* sparse reads must seek, not decode everything: 3 frames of a 72-frame clip with GOP 12 */
    st = mv_video_open(VDIR "h264_192x128_24fps.mp4", &v, &info, &e);
    if (st == MV_OK) {
        int64_t idx[3] = {5, 40, 70};
        uint8_t *fr = NULL;
        int64_t before = mv_video_decoded_frames(v);
        st = mv_video_read(v, idx, 3, &fr, NULL, &e);
        int64_t used = mv_video_decoded_frames(v) - before;
        CHECK(st == MV_OK && used < 40, "sparse read of frames 5 40 70 of 72 decoded %lld frames (< 40)",
              (long long)used);
        free(fr);
        mv_video_close(v);
    } else {
        CHECK(0, "open h264_192x128_24fps.mp4: %s", e.msg);
    }

    static const struct { const char *path, *want; mv_status st; } bad[] = {
        {"fixtures/bad/video_truncated.mp4", "video_truncated.mp4: decode failed at frame 26 of 48", MV_ERR_FORMAT},
        {"fixtures/bad/video_no_video_stream.mp4", "video_no_video_stream.mp4: no video stream", MV_ERR_FORMAT},
        {"fixtures/bad/video_no_moov.mp4", "video_no_moov.mp4: Invalid data found", MV_ERR_FORMAT},
        {"fixtures/bad/does_not_exist.mp4", "does_not_exist.mp4: No such file", MV_ERR_IO},
    };
    for (int i = 0; i < 4; i++) {
        memset(&e, 0, sizeof e);
        st = mv_video_open(bad[i].path, &v, &info, &e);
        CHECK(st == bad[i].st && v == NULL && strstr(e.msg, bad[i].want), "%s fails: %s", bad[i].path, e.msg);
    }
    /* the pixel budget: a frame over it is refused at open; a read over it before allocating */
    mv_video_limits lim = {.max_pixels = 192 * 128 - 1};
    st = mv_video_open_with(VDIR "h264_192x128_24fps.mp4", &lim, &v, &info, &e);
    CHECK(st == MV_ERR_LIMIT && v == NULL && strstr(e.msg, "video frame size 192x128 (24576 pixels) exceeds the limit of 24575"),
          "max_pixels one below the frame size refuses the open: %s", st == MV_OK ? "opened" : e.msg);
    lim.max_pixels = 192 * 128 * 3;
    st = mv_video_open_with(VDIR "h264_192x128_24fps.mp4", &lim, &v, &info, &e);
    CHECK(st == MV_OK && mv_video_frames_per_read(v) == 3, "a 3-frame budget: 3 frames per read (%s)",
          st == MV_OK ? "ok" : e.msg);
    if (st == MV_OK) {
        int64_t idx[4] = {0, 1, 2, 3};
        uint8_t *fr = NULL;
        st = mv_video_read(v, idx, 4, &fr, NULL, &e);
        CHECK(st == MV_ERR_LIMIT && fr == NULL && strstr(e.msg, "4 frames of 192x128"), "reading 4 is refused: %s",
              st == MV_OK ? "read" : e.msg);
        free(fr);
        st = mv_video_read(v, idx, 3, &fr, NULL, &e);
        CHECK(st == MV_OK, "reading 3 is fine (%s)", st == MV_OK ? "ok" : e.msg);
        free(fr);
        mv_video_close(v);
    }
    st = mv_video_open_limited(VDIR "h264_192x128_24fps.mp4", 1e-9, &v, &info, &e);
    CHECK(st == MV_ERR_LIMIT && strstr(e.msg, "h264_192x128_24fps.mp4") && strstr(e.msg, "time limit"),
          "a 1 ns time limit stops the open: %s", st == MV_OK ? "opened" : e.msg);
    if (st == MV_OK)
        mv_video_close(v);
}
#endif

/* test_video             the tables and every fixture
 * test_video FILE...     only FILE... against the ffmpeg CLI (test/bats/72-decode-limits.bats
 *                        builds awkward videos with the CLI and checks them this way) */
int main(int argc, char **argv)
{
#ifdef MV_HAVE_FFMPEG
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            test_video_file(argv[i], argv[i]);
        return UNIT_DONE();
    }
#endif
    (void)argc;
    (void)argv;
    test_sampling();
#ifdef MV_HAVE_FFMPEG
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        test_fixture(fixtures[i]);
    test_specifics();
    test_inputs();
#else
    mv_err e = {{0}};
    mv_video *v = (mv_video *)1;
    mv_video_info info;
    mv_status st = mv_video_open(VDIR "h264_3frames.mp4", &v, &info, &e);
    CHECK(st == MV_ERR_UNSUPPORTED && v == NULL && strstr(e.msg, "built without FFmpeg"),
          "without FFmpeg, open says so: %s", e.msg);
#endif
    return UNIT_DONE();
}

/* Generator of the tables above (run with /usr/bin/python3, numpy 1.24.2):
# Generates the numpy/HF tables embedded in test/unit/test_video.c
import math, numpy as np
def smart_resize(num_frames, height, width, temporal_factor=2, factor=32, min_pixels=0, max_pixels=0):
    if num_frames < temporal_factor: return None
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale); width = int(width * scale)
    if max(height, width) / min(height, width) > 200: return None
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
pairs = [(1,1),(2,2),(3,4),(4,3),(5,4),(6,4),(7,4),(10,4),(11,6),(12,8),(24,4),(25,4),(30,8),(72,6),(72,7),(100,7),
         (101,10),(120,13),(150,30),(300,21),(999,17),(1000,768),(1234,768),(3,3),(9,6),(17,16),(49,10),(2,5),(5,8)]
rng = np.random.default_rng(7)
for _ in range(24):
    t = int(rng.integers(1, 20000)); n = int(rng.integers(1, min(t, 48) + 1)); pairs.append((t, n))
flat = []
for t, n in pairs:
    flat += [int(x) for x in np.linspace(0, t - 1, n).round().astype(int)]
print("/ * (total, n) pairs and np.linspace(0, total-1, n).round().astype(int), numpy %s * /" % np.__version__)
print("static const int64_t lin_pairs[][2] = {" + ", ".join("{%d, %d}" % p for p in pairs) + "};")
print("static const int64_t lin_idx[] = {" + ", ".join(map(str, flat)) + "};")
nf = [(72,24.0,2.0,4,768),(3,10.0,2.0,4,768),(24,96/13,2.0,4,768),(10,10.0,2.0,4,768),(100000,30.0,2.0,4,768),
      (301,29.97,2.0,4,768),(120,30000/1001,2.0,4,768),(45,25.0,1.0,4,768),(45,25.0,0.5,4,768),(1000,24.0,3.0,4,100),
      (50,-1,2.0,4,768),(7,24.0,-1,4,768),(2,24.0,-1,4,768),(900,24.0,-1,4,768),(241,60.0,2.0,4,768)]
def hf_n(total, vfps, fps, mn, mx):
    if fps > 0:
        if vfps <= 0: vfps = 24
        n = int(total / vfps * fps); return min(max(n, mn), mx, total)
    return min(max(total, mn), mx)
print("static const struct { int64_t total; double vfps, fps; int mn, mx, want; } nf_cases[] = {")
for c in nf: print("    {%d, %.17g, %.17g, %d, %d, %d}," % (c + (hf_n(*c),)))
print("};")
sr = [(4,64,96,4096,25165824),(2,96,128,131072,786432),(3,61,97,131072,786432),(24,1080,1920,4096,25165824),
      (768,1080,1920,4096,25165824),(16,720,1280,131072,786432),(5,20,300,4096,25165824),(6,33,31,4096,25165824),
      (30,480,640,4096,25165824),(7,100,150,4096,25165824),(4,16,16,131072,786432),(12,1920,1080,131072,786432),
      (9,49,81,4096,786432),(2,31,6000,4096,25165824),(10,3,500,4096,25165824),(2,20,5000,4096,25165824),(3,48,48,4096,25165824),(1,64,64,4096,25165824)]
print("static const struct { int t, h, w; long long mn, mx; int oh, ow; } sr_cases[] = {")
for c in sr:
    r = smart_resize(c[0], c[1], c[2], 2, 32, c[3], c[4])
    print("    {%d, %d, %d, %d, %d, %d, %d}," % (c + (r if r else (-1, -1))))
print("};")
def cap(t, factor, mn, mx): return max(min(768*factor*factor, mx // t), int(mn * 1.05)) * t
cp = [(4,32,131072,786432),(100,32,131072,786432),(1,32,4096,25165824),(768,32,4096,25165824),(3,32,12345,786432)]
print("static const struct { int t, f; long long mn, mx, want; } cap_cases[] = {")
for c in cp: print("    {%d, %d, %d, %d, %d}," % (c + (cap(*c),)))
print("};")
*/
